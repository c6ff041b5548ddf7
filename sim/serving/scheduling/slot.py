"""The decode scheduler: iteration-level continuous batching (Orca), with memory-aware admission
and preemption when memory runs out (vLLM).

Each iteration the scheduler admits waiting sequences into free slots (one worker CU each),
tells every running worker to do one step and waits for all of them. Admissions run on the
side (a stalled one, waiting for memory that running sequences hold, must not hold up their
steps); a sequence joins the iterations once its prefill has replied.

Memory-aware admission (``memory.on_oom = "preempt"``, or ``memory.admit_watermark`` > 0):
the scheduler keeps the books of the KV room its sequences hold on every MU, as vLLM's block
manager does (each buffer's tokens rounded up as the memory policy reserves them, with room
for every running sequence's next step), and the first waiting sequence starts only when its
buffers fit with ``admit_watermark`` of every MU left free; first come, first served (a
sequence that does not fit holds back those behind it). Without either, admission is as
before: a free slot and an arrival are enough.

Preemption (``memory.on_oom = "preempt"``, Kwon et al., SOSP 2023): an MU refuses an append
that does not fit, and the worker reports its step blocked. Once every step of the iteration
has replied, for each blocked sequence in slot order the scheduler preempts the running
sequence admitted most recently (vLLM's victim: the lowest priority under first come, first
served), waits until its room is free, and has the blocked worker go on with its step; if
the step is blocked again it preempts the next, and a sequence that is itself the most
recently admitted is preempted instead. A preempted sequence goes back to the head of the
waiting queue: ``recompute`` has freed its KV and prefills prompt and generated tokens again
(producing its next token); ``swap`` has written its KV to DRAM and reads it back when it is
admitted again. A sequence that cannot fit on an otherwise empty chip is refused (failed),
so a run never waits forever.
"""

from __future__ import annotations

from array import array
from bisect import insort
from dataclasses import dataclass, field

from sim.chip import messages as m
from sim.chip.references import share
from sim.chip.units import ComputeUnit, Replies, Sleep
from sim.serving.metrics import SERVED, RequestLog
from sim.serving.scheduling import SCHEDULERS
from sim.serving.scheduling.interface import StepSink
from sim.serving.scheduling.output import SchedulerOutput
from sim.tasks import Task

DROP_WAIT, DROP_WAITS = 64, 8  # cycles, times: an empty chip's refused head waits for the index's drops


@dataclass
class Request:
    """The scheduler's view of one sequence."""

    seq: int
    arrival: int
    prompt: int
    output: int
    admitted: int = -1  # cycle of its first admission
    order: int = -1  # admissions before its latest one (the victim is the largest)
    made: int = 0  # tokens generated so far
    token_cycles: array = field(default_factory=lambda: array("q"))  # each token's cycle, 8 bytes a token
    preemptions: int = 0
    swapped: int = -1  # swap: the slot whose placement its KV was swapped out from (-1: none)

    @property
    def admit_tokens(self) -> int:
        """KV tokens its admission allocates: the prompt (and, after a recompute, the tokens it had
        made: vLLM prefills them again), or after a swap the KV it had (prompt + made - 1)."""
        return self.prompt + self.made - (1 if self.swapped >= 0 else 0)

    @property
    def kv_tokens(self) -> int:
        """KV tokens it holds while running: the prefill's tokens plus one per later token."""
        return self.prompt + max(self.made - 1, 0)


@SCHEDULERS.register("slot")
class SlotScheduler:
    """One run of the scheduler CU's task (``run``); ``program`` is the KvDecode it serves.
    A Scheduler (interface.py): its workers take their own KV, so its steps grant none; it
    prefills on admission, beside the steps, and a step's record lists the admissions since the
    previous one."""

    def __init__(self, program, cu: ComputeUnit, on_step: StepSink | None = None) -> None:
        self.prog = program
        self.cu = cu
        self.shard = cu.shard
        cfg = program.cfg
        self.preempt = cfg.on_oom == "preempt"
        self.aware = self.preempt or cfg.admit_watermark > 0  # memory-aware admission
        self.room = cfg.policy.room(cfg.mu)
        self.limit = (1.0 - cfg.admit_watermark) * self.room.capacity
        arrive = program.arrivals()
        self.reqs = [Request(s, arrive[s], *program.lengths(s)) for s in range(program.p.requests)]
        self.waiting: list[int] = list(range(program.p.requests))
        self.free_slots = list(range(len(program.workers)))
        self.running: dict[int, int] = {}  # slot -> sequence
        self.admitting: dict[int, tuple[int, int]] = {}  # reply tag -> (slot, sequence)
        self.blocked: list[int] = []  # slots whose step could not grow a buffer
        self.head_refused = False  # the head's admission found no room: wait for room to be freed
        self.admissions = 0
        self.prefix = program.prefix_index()  # prefix sharing: the shared blocks' index (None: no sharing)
        self.drop_waits = 0  # waits for the index's dropped blocks to be freed (_room_coming)
        self.on_step = on_step
        self.steps = 0
        self.prefilled: dict[int, int] = {}  # admissions since the last step's record: sequence -> tokens
        self.preempted: list[int] = []  # since the last step's record
        self.ended: dict[int, str] = {}  # since the last step's record: sequence -> status

    # ------------------------------------------------------------------ the loop
    def run(self) -> Task:
        while True:
            planned = yield from self.schedule()
            if planned is None:
                break
            done = yield from self.update(planned)
            if self.on_step is not None:
                self.on_step(done)
        if self.prefix is not None:
            self.prefix.trim(self.cu, 0)  # every request served: the prefix cache lets go of its blocks

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running or self.admitting)

    def schedule(self) -> Task:
        """Admit into free slots and settle admissions until some sequence runs: the step every
        running sequence takes next (None: every request has ended)."""
        cu, shard = self.cu, self.shard
        while self.has_unfinished():
            yield from self._admit()
            for tag in list(self.admitting):
                r = cu.arrived(tag)
                if r is not None:
                    self._settle(*self.admitting.pop(tag), r)
            if self.running:
                decode = tuple(seq for _, seq in sorted(self.running.items()))
                return SchedulerOutput(self.steps, shard.now, shard.now, decode, dict(self.prefilled),
                                       self.prog.step_tokens)
            if self.admitting:
                got = yield Replies(list(self.admitting), "control", first=True)
                for tag, r in sorted(got.items()):
                    self._settle(*self.admitting.pop(tag), r)
            elif self.waiting:
                head = self.reqs[self.waiting[0]]
                if head.arrival <= shard.now and self.aware and self._room_coming(head):
                    yield Sleep(DROP_WAIT)
                    continue
                if head.arrival <= shard.now and self.aware:  # the chip is empty, and still it does not fit
                    shard.counts["admitted"] += head.admitted < 0  # taken from the queue: refused
                    self._end(self.waiting.pop(0), "failed")
                    continue
                yield Sleep(max(1, head.arrival - shard.now))
        return None

    def update(self, planned: SchedulerOutput) -> Task:
        """Every running worker takes its step; blocked steps go on once others are preempted."""
        cu, shard = self.cu, self.shard
        t0 = shard.now
        tags = {cu.request(m.CONTROL, self.prog.workers[slot], arg=m.CTRL_STEP, buf=seq, nbytes=slot): slot
                for slot, seq in sorted(self.running.items())}
        got = yield Replies(list(tags), "control")
        made = sum(r.nbytes for r in got.values())
        for tag, slot in sorted(tags.items(), key=lambda x: x[1]):
            self._settle(slot, self.running.pop(slot), got[tag])
        if self.blocked:
            made += yield from self._unblock()
        shard.record("step", t0, t0, shard.now, made, "ok")
        done = SchedulerOutput(planned.step, t0, shard.now, planned.decode, planned.prefill, planned.decode_tokens,
                               made, preempted=tuple(self.preempted), ended=self.ended)
        self.steps += 1
        self.prefilled, self.preempted, self.ended = {}, [], {}
        return done

    def _room_coming(self, head: Request) -> bool:
        """Under prefix sharing the blocks the index let go are freed by protocol messages no one
        acknowledges: an admission refused on an empty chip whose books say it fits waits for them
        (a few times) before the request is refused."""
        if self.prefix is None or self.drop_waits >= DROP_WAITS or not self._fits(head, self.free_slots[0]):
            return False
        self.drop_waits += 1
        self.head_refused = False
        return True

    # ------------------------------------------------------------------ admission
    def _admit(self) -> Task:
        """Admit what arrived into free slots (a task: under prefix sharing the shared blocks' references
        go to the worker through the protocol, which may wait for acknowledgements)."""
        cu, shard = self.cu, self.shard
        while self.waiting and self.free_slots and self.reqs[self.waiting[0]].arrival <= shard.now:
            r = self.reqs[self.waiting[0]]
            if self.aware and not self.head_refused:
                while self.prefix is not None and self.prefix.cached and not self._fits(r, self.free_slots[0]):
                    self.prefix.trim(cu, self.prefix.cached_bytes - 1)  # the prefix cache gives its room back
            if self.aware and (self.head_refused or not self._fits(r, self.free_slots[0])):
                return  # first come, first served: the head holds back those behind it
            seq, slot = self.waiting.pop(0), self.free_slots.pop(0)
            self.drop_waits = 0
            first = r.admitted < 0
            if first:
                r.admitted = shard.now
                shard.counts["admitted"] += 1
            r.order, self.admissions = self.admissions, self.admissions + 1
            ids = self.prog.prefix_ids(seq)
            hits = self.prefix.hits(ids) if self.prefix is not None else 0
            if r.swapped < 0:  # a swapped-out sequence reads its KV back: nothing prefilled
                cached = hits * self.prog.block_tokens if hits else 0  # the shared blocks' tokens
                self.prefilled[seq] = r.admit_tokens - cached
            tag = cu.request(m.CONTROL, self.prog.workers[slot], arg=m.CTRL_ADMIT, buf=seq, nbytes=slot,
                             **({"alloc": r.made, "mu": r.swapped} if self.preempt else {}),
                             **({"status": hits} if hits else {}))  # status: the prefix blocks shared with it
            self.admitting[tag] = (slot, seq)
            if self.prefix is not None:
                got = self.prefix.admit(tag, seq, ids, hits)
                if first:
                    shard.log(self.prefix.log(seq, tag))
                refs = [ref for blk in got for ref in blk.refs]
                if refs:
                    worker = self.prog.workers[slot]
                    yield from share(cu, refs, [[worker]] * len(refs), self.prog.cfg.reclaim,
                                     [[i] for i in range(len(refs))])

    def _held(self, seq: int, slot: int, tokens: int, into: dict[int, int], new: bool = False) -> None:
        """Add the room sequence ``seq``'s buffers reserve in ``slot`` at ``tokens`` KV tokens, by MU
        (under prefix sharing: its tail, and the blocks it wrote that only it holds; ``new``: not yet
        admitted, its blocks as the index holds them now)."""
        tb, pre = self.prog.p.token_bytes, 0
        own: list[int] = []
        if self.prefix is not None:
            ids = self.prog.prefix_ids(seq)
            pre = len(ids) * self.prefix.block_tokens
            own = list(range(self.prefix.hits(ids), len(ids))) if new else self.prefix.own(seq)
        room = self.room.reserve((tokens - pre) * tb)
        for mu in self.prog.placement(slot, seq):
            into[mu] = into.get(mu, 0) + room
        block = self.room.reserve(self.prog.block_tokens * tb)
        for j in own:
            for mu in self.prog.block_placement(slot, seq, j):
                into[mu] = into.get(mu, 0) + block

    def _fits(self, r: Request, slot: int) -> bool:
        """The books: r's buffers fit beside every running and admitting sequence's with the room its
        next step appends (vLLM reserves the running sequences' next slots before it admits), the
        watermark kept free."""
        held: dict[int, int] = {}
        step = self.prog.step_tokens
        for s, seq in self.running.items():
            self._held(seq, s, self.reqs[seq].kv_tokens + step, held)
        for s, seq in self.admitting.values():
            self._held(seq, s, self.reqs[seq].admit_tokens + step, held)
        if self.prefix is not None:
            self.prefix.held(self.room, held)  # the shared blocks, once each
        need: dict[int, int] = {}
        self._held(r.seq, slot, r.admit_tokens, need, new=True)
        return all(held.get(mu, 0) + n <= self.limit for mu, n in need.items())

    # ------------------------------------------------------------------ replies
    def _settle(self, slot: int, seq: int, r: m.Message) -> None:
        q = self.reqs[seq]
        q.made += r.nbytes
        q.token_cycles.extend([r.sent] * r.nbytes)  # the cycle the worker made them
        if r.arg in (m.RUNNING, m.BLOCKED):
            self.running[slot] = seq
            q.swapped = -1  # running: its KV is on chip
            if r.arg == m.BLOCKED:
                insort(self.blocked, slot)
            return
        self._free_slot(slot)
        if self.prefix is not None:
            self.prefix.release(self.cu, seq)
        if r.arg == m.NO_ROOM:  # its admission found no room after all: first in line again
            self.waiting.insert(0, seq)
            self.head_refused = True
            return
        self._end(seq, SERVED if r.arg == m.FINISHED else "failed")

    def _free_slot(self, slot: int) -> None:
        self.free_slots.append(slot)
        self.free_slots.sort()

    def _end(self, seq: int, status: str) -> None:
        shard, q = self.shard, self.reqs[seq]
        shard.counts["finished"] += 1
        self.head_refused = False  # its room is free
        self.ended[seq] = status
        shard.record("request", seq, q.arrival, shard.now, q.made, status)
        shard.log(RequestLog(seq, q.arrival, q.admitted, q.token_cycles, q.preemptions, status, q.prompt))

    # ------------------------------------------------------------------ preemption
    def _unblock(self) -> Task:
        """Preempt until every blocked step has gone on (or its sequence was preempted); returns the
        tokens the resumed steps made."""
        cu, made = self.cu, 0
        while self.blocked:
            slot = self.blocked[0]
            victim = max(self.running, key=lambda s: self.reqs[self.running[s]].order)
            yield from self._preempt(victim)
            if victim == slot:
                continue
            tag = cu.request(m.CONTROL, self.prog.workers[slot], arg=m.CTRL_RESUME, buf=self.running[slot],
                             nbytes=slot)
            self.blocked.pop(0)
            got = yield Replies([tag], "control")
            made += got[tag].nbytes
            self._settle(slot, self.running.pop(slot), got[tag])
        return made

    def _preempt(self, slot: int) -> Task:
        """Preempt the sequence in ``slot`` and put it first in line again once its room is free."""
        cu, shard = self.cu, self.shard
        seq = self.running.pop(slot)
        if slot in self.blocked:
            self.blocked.remove(slot)
        t0 = shard.now
        tag = cu.request(m.CONTROL, self.prog.workers[slot], arg=m.CTRL_PREEMPT, buf=seq, nbytes=slot)
        yield Replies([tag], "control")
        if self.prefix is not None:
            self.prefix.release(cu, seq)
        q = self.reqs[seq]
        q.preemptions += 1
        self.preempted.append(seq)
        q.swapped = slot if self.prog.cfg.preempt_mode == "swap" else -1
        shard.trace_span(cu.uid, f"preempt sequence {seq} ({self.prog.cfg.preempt_mode})", t0, shard.now - t0,
                         "wait", {"sequence": seq, "tokens": q.made})
        self._free_slot(slot)
        self.waiting.insert(0, seq)
        self.head_refused = False  # its room is free

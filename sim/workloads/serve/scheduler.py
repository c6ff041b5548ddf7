"""The serving scheduler at real scale: continuous batching of whole-chip steps.

One CU (``scheduler_tile``) runs it. Each step (Orca's iteration-level batching, Yu et al.,
OSDI 2022, as vLLM v1 schedules it):

1. requests that have arrived are admitted in arrival order (first come, first served: the
   head holds back those behind it) while fewer than ``max_sequences`` run and, under
   memory-aware admission (``memory.on_oom = "preempt"`` or ``memory.admit_watermark`` > 0),
   while the head's prompt fits in the KV tier's free pages with the watermark kept free;
2. the step is filled with a token for every running sequence whose prompt is done (decode
   first, Sarathi-Serve's decode-maximal batching), then with prefill: each prefilling
   sequence's next chunk (``chunk_tokens``; 0: the whole prompt) in admission order, within
   ``max_step_tokens`` (a whole prompt larger than the budget runs alone);
3. every sequence's KV region in the chip's first memory tier grows by the tokens the step
   adds: real messages to the tier's controller (sim/chip/tier.py), which gives pages or
   refuses; a refusal is handled as ``memory.on_oom`` says: ``preempt`` (vLLM, Kwon et al.,
   SOSP 2023: the most recently admitted running sequence is preempted and the step planned
   again; ``recompute`` frees its KV and later prefills its prompt and tokens again, ``swap``
   first copies it to the next tier, DDR, and copies it back when it is admitted again),
   ``evict`` (the same as ``preempt`` with ``swap``: a tier's evicted KV goes to the next
   tier), ``fail`` (the sequence fails, its KV freed) or ``stall`` (the sequence sits the step
   out and tries again; a step in which no sequence can go on ends the run, deadlocked);
4. the step lasts what its shape costs (costs.py: its roofline times the efficiency of its
   anchor's plan, mapped and simulated cycle by cycle on the chip), then its tokens are made:
   a decode token for each decode sequence, the first token for each prompt it finished;
   finished sequences free their regions.

What is simulated cycle by cycle here: the scheduler's decisions and time, every KV region's
pages at the tier's controller (allocation, growth, refusal, free), swaps as flows between
tiers. What is priced: each step's duration (anchors, costs.py). The step's own weight and
KV traffic is not replayed in the tier's flows (it is inside the price), so a swap's copy
does not slow a concurrent step down.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.chip import messages as m
from sim.chip.spec import tier_unit
from sim.chip.units import ComputeUnit, Replies, Sleep
from sim.workloads import Task
from sim.workloads.base import Floorplan
from sim.workloads.kv_decode import KvDecode
from sim.workloads.serve.costs import StepCosts
from sim.workloads.serve.figures import StepFailure, StepLog
from sim.workloads.serve.shapes import StepShape
from sim.workloads.serving import SERVED, PreemptionLog, RequestLog


@dataclass
class Sequence:
    """The scheduler's view of one request."""

    seq: int
    arrival: int
    prompt: int
    output: int
    admitted: int = -1  # cycle of its first admission
    order: int = -1  # admissions before its latest one (the victim is the largest)
    made: int = 0  # tokens generated
    filled: int = 0  # tokens of its current prefill done
    prefill: int = 0  # tokens its current prefill computes: the prompt, or after a recompute prompt + made
    kv: int = 0  # tokens its KV cache holds
    reserved: int = 0  # tokens its region has room for (it grows ahead of a step, never shrinks)
    region: int = -1  # its KV region at the first tier's controller
    swapped: int = -1  # its KV region in the swap tier (-1: none)
    preemptions: int = 0
    token_cycles: list[int] = field(default_factory=list)

    @property
    def decoding(self) -> bool:
        return self.filled >= self.prefill


class Serving:
    """The program of a serve run's CUs: the scheduler's task on its CU, nothing on the others."""

    def __init__(self, p, cfg):
        self.p = p
        self.cfg = cfg
        spec = cfg.spec
        self.scheduler = Floorplan(cfg).unit_at(*divmod(p.scheduler_tile, spec.cols))
        self.tier = tier_unit(spec, spec.tiers[0].name)
        self.swap_tier = tier_unit(spec, spec.tiers[1].name) if len(spec.tiers) > 1 else -1
        self.page = spec.tiers[0].page_bytes
        self.pages = int(spec.tiers[0].capacity // self.page)
        self.kv_token = p.model.kv_bytes_per_token

    # the requests: drawn or from the trace exactly as kv-decode draws them
    def lengths(self, seq: int) -> tuple[int, int]:
        return KvDecode.lengths(self, seq)  # type: ignore[arg-type]

    def arrivals(self) -> list[int]:
        return KvDecode.arrivals(self)  # type: ignore[arg-type]

    def start(self, cu: ComputeUnit):
        return Scheduler(self, cu).run() if cu.uid == self.scheduler else None

    def on_message(self, cu, msg):
        raise RuntimeError(f"serve CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")


class Scheduler:
    """One run of the scheduler CU's task (module docstring)."""

    def __init__(self, prog: Serving, cu: ComputeUnit):
        self.prog = prog
        self.p = prog.p
        self.cu = cu
        self.shard = cu.shard
        cfg = prog.cfg
        self.on_oom = cfg.on_oom
        self.swap = cfg.on_oom == "evict" or (cfg.on_oom == "preempt" and cfg.preempt_mode == "swap")
        if self.swap and prog.swap_tier < 0:
            self.swap = False  # one tier: nowhere to swap to, so recompute
        self.aware = cfg.on_oom == "preempt" or cfg.admit_watermark > 0
        self.limit = int((1.0 - cfg.admit_watermark) * prog.pages)
        arrive = prog.arrivals()
        self.seqs = [Sequence(s, arrive[s], *prog.lengths(s)) for s in range(self.p.requests)]
        for q in self.seqs:
            q.prefill = q.prompt
        self.waiting: list[int] = list(range(self.p.requests))
        self.running: list[int] = []  # in admission order
        self.admissions = 0
        self.pages_used = 0  # the books: pages the weights and every region hold
        self.held: dict[int, int] = {}  # sequence -> pages its region holds
        self.costs = StepCosts(cfg, self.p.model, self.p.costs)
        self.steps = 0

    # ------------------------------------------------------------------ the loop
    def run(self) -> Task:
        cu, shard = self.cu, self.shard
        ok = yield from self._load_weights()
        if not ok:
            for s in list(self.waiting):
                self._end(s, "failed")
            return
        while self.waiting or self.running:
            self._admit()
            if not self.running:
                if not self.waiting:
                    break
                head = self.seqs[self.waiting[0]]
                if head.arrival > shard.now:
                    yield Sleep(head.arrival - shard.now)
                    continue
                self.shard.counts["admitted"] += head.admitted < 0
                self._end(self.waiting.pop(0), "failed")  # an empty chip and still it does not fit
                continue
            step = yield from self._plan_step()
            if step is None:  # every running sequence stalled: nothing can go on
                break
            decode, chunks = step
            shape = StepShape.of([self.seqs[s].kv for s in decode],
                                 [(c, self.seqs[s].kv, self.seqs[s].filled + c >= self.seqs[s].prefill)
                                  for s, c in chunks])
            t0 = shard.now
            try:
                cycles, roof = self.costs.price(shape)
            except ValueError as exc:  # its plan does not map, fit or run: no step of this shape can
                shard.log(StepFailure(self.steps, str(exc)))
                for s in self.running + self.waiting:
                    self.shard.counts["admitted"] += self.seqs[s].admitted < 0
                    self._end(s, "failed")
                break
            yield Sleep(cycles)
            made = self._apply(decode, chunks)
            shard.record("step", self.steps, t0, shard.now, made, "ok")
            written = shape.tokens * self.prog.kv_token
            shard.log(StepLog(self.steps, t0, shard.now, len(decode), sum(c for _, c in chunks), shape.tokens,
                              shape.keys, shape.kv_read, made, int(roof.bytes) - written, written,
                              int(roof.flops)))
            self.steps += 1
            yield from self._finish_done()
        for log in self.costs.logs:
            shard.log(log)
        del cu

    # ------------------------------------------------------------------ the model's weights
    def _load_weights(self) -> Task:
        """The model's weights take their pages in the first tier (they live there for the run)."""
        nbytes = self.p.model.weight_bytes
        tag = self.cu.request(m.CONTROL, self.prog.tier, arg=m.CTRL_TIER_ALLOC, nbytes=nbytes)
        got = yield Replies([tag], "memory")
        self.pages_used += -(-nbytes // self.prog.page)
        return got[tag].status == m.STATUS_OK

    # ------------------------------------------------------------------ admission
    def _pages(self, tokens: int) -> int:
        return -(-tokens * self.prog.kv_token // self.prog.page)

    def _promised(self) -> int:
        """Pages the running sequences will hold once their prefills are done (vLLM's block manager
        counts a sequence's prompt blocks when it admits it): what regions hold, and what they lack."""
        more = 0
        for s in self.running:
            q = self.seqs[s]
            more += max(0, self._pages(q.kv + q.prefill - q.filled) - self.held.get(s, 0))
        return self.pages_used + more

    def _admit(self) -> None:
        now = self.shard.now
        promised = self._promised() if self.aware else 0
        while self.waiting and len(self.running) < self.p.max_sequences and self.seqs[self.waiting[0]].arrival <= now:
            s = self.seqs[self.waiting[0]]
            need = self._pages(s.prompt + s.made) if s.swapped < 0 else self._pages(s.kv + 1)
            if self.aware and promised + need > self.limit:
                return  # first come, first served: the head holds back those behind it
            promised += need
            self.waiting.pop(0)
            if s.admitted < 0:
                s.admitted = now
                self.shard.counts["admitted"] += 1
            s.order, self.admissions = self.admissions, self.admissions + 1
            self.running.append(s.seq)

    # ------------------------------------------------------------------ a step
    def _plan_step(self) -> Task:
        """The step's decode sequences and prefill chunks, their KV regions grown to hold what it
        adds (on_oom handled); None if nothing can run."""
        while True:
            decode = [s for s in self.running if self.seqs[s].decoding]
            budget = max(0, self.p.max_step_tokens - len(decode))
            chunks: list[tuple[int, int]] = []
            for s in self.running:
                q = self.seqs[s]
                if q.decoding:
                    continue
                left = q.prefill - q.filled
                c = min(left, self.p.chunk_tokens) if self.p.chunk_tokens else left
                if c > budget:
                    if self.p.chunk_tokens:
                        c = budget
                    elif decode or chunks:  # a whole prompt beyond the budget runs alone (a later step)
                        break
                if c <= 0:
                    break
                chunks.append((s, c))
                budget -= c
            need = {s: 1 for s in decode} | dict(chunks)
            if not need:
                return None
            refused = yield from self._reserve(need)
            if not refused:
                return decode, chunks
            if self.on_oom == "stall":  # the refused sit this step out; the others have their room
                decode = [s for s in decode if s not in refused]
                chunks = [(s, c) for s, c in chunks if s not in refused]
                return (decode, chunks) if decode or chunks else None
            if self.on_oom == "fail" or len(self.running) == 1:  # (alone on the chip and still no room: never)
                for s in refused:
                    self.running.remove(s)
                    yield from self._free(s)
                    self._end(s, "failed")
                continue
            # preempt and evict: the most recently admitted running sequence gives its room back
            victim = max(self.running, key=lambda x: self.seqs[x].order)
            yield from self._preempt(victim)

    def _reserve(self, need: dict[int, int]) -> Task:
        """Have every sequence's KV region hold its cache and the ``need`` tokens the step adds
        (allocating a region where it has none, bringing a swapped-out cache back first): the
        set of sequences the tier refused (their regions are as they were)."""
        cu, prog = self.cu, self.prog
        for s in [s for s in need if self.seqs[s].swapped >= 0]:
            ok = yield from self._swap_in(s)
            if not ok:
                return {s}
        tags, pages = {}, {}
        for s, n in need.items():
            q = self.seqs[s]
            if q.kv + n <= q.reserved:  # its last page has room
                continue
            pages[s] = self._pages(q.kv + n)
            nbytes = (pages[s] - self.held.get(s, 0)) * prog.page  # whole pages: the tier gives no less
            if q.region < 0:
                tags[cu.request(m.CONTROL, prog.tier, arg=m.CTRL_TIER_ALLOC, nbytes=nbytes)] = s
            else:
                tags[cu.request(m.CONTROL, prog.tier, arg=m.CTRL_TIER_GROW, buf=q.region, nbytes=nbytes)] = s
        if not tags:
            return set()
        got = yield Replies(list(tags), "memory")
        refused = set()
        for tag, s in tags.items():
            q = self.seqs[s]
            if got[tag].status != m.STATUS_OK:
                refused.add(s)
                continue
            q.region = got[tag].buf
            self._book(s, pages[s])
            q.reserved = pages[s] * prog.page // prog.kv_token
        return refused

    def _book(self, s: int, pages: int) -> None:
        """The books: sequence ``s``'s region holds ``pages`` pages."""
        self.pages_used += pages - self.held.get(s, 0)
        self.held[s] = pages

    def _free(self, s: int) -> Task:
        """Free a sequence's region (waiting for the controller: the pages are free when it answers)."""
        q = self.seqs[s]
        if q.region >= 0:
            tag = self.cu.request(m.CONTROL, self.prog.tier, arg=m.CTRL_TIER_FREE, buf=q.region)
            yield Replies([tag], "memory")
            q.region, q.reserved = -1, 0
        self.pages_used -= self.held.pop(s, 0)

    # ------------------------------------------------------------------ preemption
    def _preempt(self, s: int) -> Task:
        """Preempt sequence ``s``: swap its KV to the next tier or drop it (recompute), free its
        region, and put it first in line again."""
        shard, q, prog = self.shard, self.seqs[s], self.prog
        t0 = shard.now
        self.running.remove(s)
        nbytes = q.kv * prog.kv_token
        what = "recompute"
        if self.swap and q.kv and q.decoding:
            what = "swap-out"
            tag = self.cu.request(m.CONTROL, prog.swap_tier, arg=m.CTRL_TIER_ALLOC, nbytes=nbytes)
            got = yield Replies([tag], "memory")
            if got[tag].status == m.STATUS_OK:
                q.swapped = got[tag].buf
                tag = self.cu.request(m.CONTROL, prog.tier, arg=m.CTRL_COPY, buf=prog.swap_tier, nbytes=nbytes)
                yield Replies([tag], "memory")
            else:
                what = "recompute"  # the swap tier is full too
        moved = shard.now
        yield from self._free(s)
        if q.swapped < 0:  # recompute: its prompt and the tokens it made are prefilled again
            q.filled, q.kv, q.prefill = 0, 0, q.prompt + q.made
        q.preemptions += 1
        shard.log(PreemptionLog(s, self.cu.uid, what, t0, moved, shard.now, nbytes))
        self.waiting.insert(0, s)

    def _swap_in(self, s: int) -> Task:
        """Bring a swapped-out sequence's KV back into the first tier; False if it has no room."""
        shard, q, prog = self.shard, self.seqs[s], self.prog
        t0 = shard.now
        nbytes = q.kv * prog.kv_token
        tag = self.cu.request(m.CONTROL, prog.tier, arg=m.CTRL_TIER_ALLOC, nbytes=nbytes)
        got = yield Replies([tag], "memory")
        if got[tag].status != m.STATUS_OK:
            return False
        q.region = got[tag].buf
        self._book(s, self._pages(q.kv))
        q.reserved = self.held[s] * prog.page // prog.kv_token
        tag = self.cu.request(m.CONTROL, prog.swap_tier, arg=m.CTRL_COPY, buf=prog.tier, nbytes=nbytes)
        yield Replies([tag], "memory")
        tag = self.cu.request(m.CONTROL, prog.swap_tier, arg=m.CTRL_TIER_FREE, buf=q.swapped)
        yield Replies([tag], "memory")
        q.swapped = -1
        shard.log(PreemptionLog(s, self.cu.uid, "swap-in", t0, shard.now, shard.now, nbytes))
        return True

    # ------------------------------------------------------------------ after a step
    def _apply(self, decode: list[int], chunks: list[tuple[int, int]]) -> int:
        """The step's tokens: KV grown, a token for each decode sequence and each finished prefill."""
        now, made = self.shard.now, 0
        for s in decode:
            q = self.seqs[s]
            q.kv += 1
            q.made += 1
            q.token_cycles.append(now)
            made += 1
        for s, c in chunks:
            q = self.seqs[s]
            q.kv += c
            q.filled += c
            if q.decoding:  # its prefill is done: it makes the next token
                q.made += 1
                q.token_cycles.append(now)
                made += 1
        return made

    def _finish_done(self) -> Task:
        for s in [s for s in self.running if self.seqs[s].made >= self.seqs[s].output]:
            self.running.remove(s)
            yield from self._free(s)
            self._end(s, SERVED)

    def _end(self, s: int, status: str) -> None:
        shard, q = self.shard, self.seqs[s]
        shard.counts["finished"] += 1
        shard.record("request", s, q.arrival, shard.now, q.made, status)
        shard.log(RequestLog(s, q.arrival, q.admitted, tuple(q.token_cycles), q.preemptions, status))

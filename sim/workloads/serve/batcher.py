"""Continuous batching of whole-chip (or whole-system) steps: what the serving scheduler decides.

Each step (Orca's iteration-level batching, Yu et al., OSDI 2022, as vLLM v1 schedules it):

1. requests that have arrived are admitted in arrival order (first come, first served: the
   head holds back those behind it) while fewer than ``max_sequences`` run and, under
   memory-aware admission (``memory.on_oom = "preempt"`` or ``memory.admit_watermark`` > 0),
   while the head's prompt fits in the KV memory's free pages with the watermark kept free
   (vLLM's block manager: what running prompts will hold counts as taken); a server that
   reserves each request's KV ahead (``kv_reservation``, reservation.py: vLLM's Orca
   baselines) admits only while the head's whole reservation fits, and takes it at once;
2. the step is filled with a token for every running sequence whose prompt is done (decode
   first, Sarathi-Serve's decode-maximal batching), then with prefill: each prefilling
   sequence's next chunk (``chunk_tokens``; 0: the whole prompt) in admission order, within
   ``max_step_tokens`` (a whole prompt larger than the budget runs alone);
3. every sequence's KV takes the pages the step adds (a page at a time); a refusal is handled
   as ``memory.on_oom`` says: ``preempt`` (vLLM, Kwon et al., SOSP 2023: the most recently
   admitted running sequence is preempted and the step planned again; ``recompute`` drops its
   KV and later prefills its prompt and tokens again, ``swap`` first copies it to the next
   memory tier and back when it is admitted again), ``evict`` (the same as ``preempt`` with
   ``swap``, without memory-aware admission: the evicted KV goes to the next tier), ``fail``
   (the sequence fails, its KV freed) or ``stall`` (the sequence sits the step out and tries
   again; a step in which no sequence can go on ends the run, deadlocked). A victim admitted
   and in no step since (no KV of its own: ``evict`` admits a head with no room) is given back
   to the head of the queue, not preempted: nothing is lost or moved;
4. the step runs (its duration is the backend's: a priced Sleep on one chip, the chips'
   compute and collectives on a system), then its tokens are made: a decode token for each
   decode sequence, the first token for each prompt it finished; finished sequences free
   their pages.

Speculative decoding (``workload.decode.speculative``, speculative.py): a decode sequence's token
becomes its drafts and one more, verified in the step (its KV room taken for all of them), the draft
model's steps run before it, and the rejected drafts' pages are given back after it.

Prefix sharing (a trace with ``hash_ids``, ``memory.prefix_sharing``): an admission holds the
leading prompt blocks the index has (sim/serving/prefix_pool.py) and prefills only the rest, the hit tokens
read as cached keys; its own blocks are regions of their own, registered once written.

``Batcher`` holds these decisions, a Scheduler (sim/serving/scheduling/interface.py: asked
``schedule`` and ``update`` each step, answering a SchedulerOutput); the backend it is given
(``StepBackend``) says how time passes, how pages are taken and freed, how a swap moves and how
a step runs (scheduler.py: one chip's tier controller; system.py: a system of sockets).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from sim.serving.metrics import SERVED, PreemptionLog, RequestLog
from sim.serving.prefix_pool import Block, PrefixPool
from sim.serving.prefix_sharing import PrefixLog
from sim.serving.scheduling import SCHEDULERS
from sim.serving.scheduling.interface import StepSink
from sim.serving.scheduling.output import SchedulerOutput
from sim.serving.scheduling.slot import Request
from sim.workloads import Task
from sim.workloads.serve.figures import SpecStepLog, StepFailure, StepLog
from sim.workloads.serve.progress import ProgressSink, Served
from sim.workloads.serve.reservation import BatchLog, refused, reserved_tokens
from sim.workloads.serve.shapes import Roofline, StepShape
from sim.workloads.serve.speculative import Speculative


@dataclass(eq=False)
class Sequence(Request):
    """The scheduler's view of one request (the decode scheduler's record, sim/serving/scheduling/slot.py; ``swapped``:
    its KV region in the swap memory) and of its KV: its prefix blocks and its tail region."""

    filled: int = 0  # tokens of its current prefill done (a hit's tokens count as done)
    prefill: int = 0  # tokens its current prefill computes: the prompt, or after a recompute prompt + made
    kv: int = 0  # tokens its KV cache holds
    reserved: int = 0  # tail tokens its region has room for (it grows ahead of a step, never shrinks)
    region: int = -1  # its tail's KV region at the backend's memory (-1: none)
    counted: bool = False  # taken from the queue once (admitted or refused): the run's admitted count
    ids: tuple = ()  # prefix ids of its shareable blocks (none without prefix sharing)
    pre: int = 0  # KV tokens in those blocks; the tail holds the rest
    blocks: dict[int, Block] = field(default_factory=dict)  # block number -> the block it holds
    prefill_cycles: int = 0  # cycles of the steps that prefilled it before its first token
    fresh: bool = False  # admitted with no KV of its own (new, or to recompute) and in no step since
    found: PrefixLog | None = None  # its blocks and hits at its first admission, logged once that admission holds

    @property
    def decoding(self) -> bool:
        return self.filled >= self.prefill

    def tail(self, tokens: int) -> int:
        """Of ``tokens`` KV tokens, those in its tail region."""
        return max(0, tokens - self.pre)


class StepBackend(Protocol):
    """How a batcher's decisions are carried out: how time passes, where KV pages come from and
    go back to, how a swap moves, how a step runs and where its records go (scheduler.py: one
    chip's tier controller; system.py: a system of sockets)."""

    unit: int  # the unit (or chip) that schedules, named in preemption records
    keeps_batch_log: bool  # whether ``log`` keeps BatchLog records (if not, the batcher builds none)

    @property
    def now(self) -> int: ...

    def sleep(self, cycles: int) -> Task:
        """Task: let ``cycles`` pass."""
        ...

    def load_weights(self) -> Task:
        """Task: the model's weights take their pages; False if they do not fit."""
        ...

    def take_pages(self, wants: list, free: int) -> Task:
        """Task: each region (a sequence's tail or a prefix block: its ``region``, -1 until taken)
        takes its pages more, all asked at once: whether each got them (a refused one unchanged);
        ``free``: pages the batcher's books have free."""
        ...

    def free_pages(self, region) -> Task:
        """Task: a region's pages (a sequence's tail or a prefix block) are given back."""
        ...

    def swap_out(self, q: Sequence, nbytes: int) -> Task:
        """Task: copy the sequence's KV to the swap memory (setting its ``swapped``); False if full."""
        ...

    def swap_back(self, q: Sequence, nbytes: int) -> Task:
        """Task: copy its KV back from the swap memory (its pages taken already) and free it there."""
        ...

    def execute(self, shape: StepShape, step: int) -> Task:
        """Task: run the step; its roofline (ValueError if its plan cannot be priced)."""
        ...

    def count(self, what: str) -> None: ...

    def record_step(self, step: int, start: int, made: int) -> None: ...

    def record_request(self, q: Sequence, status: str) -> None: ...

    def log(self, record) -> None: ...

    def finished(self, steps: int) -> None:
        """After the last step."""
        ...


class DraftBackend(Protocol):
    """What speculative decoding (speculative.py) asks of a backend besides a StepBackend's (scheduler.py's
    one chip has it; a system of sockets does not run it)."""

    def execute_draft(self, shape: StepShape, step: int) -> Task:
        """Task: run a step of the draft model; its roofline (ValueError as ``execute``)."""
        ...

    def trim_pages(self, cuts: list) -> Task:
        """Task: each (region, pages) of ``cuts`` keeps only its first ``pages`` pages (0: none), the rest
        given back: the rejected drafts' KV reclaimed."""
        ...


@SCHEDULERS.register("continuous")
class Batcher:
    """The scheduling decisions (module docstring), carried out by a backend (StepBackend); a
    Scheduler (sim/serving/scheduling/interface.py)."""

    def __init__(self, p, cfg, requests, backend: StepBackend, pages: int, page: int, kv_token: int,
                 swap: bool = True, copies: int = 1, on_step: StepSink | None = None,
                 drafting: DraftBackend | None = None):
        """``requests``: the run's requests (sim/serving/requests.py: arrivals, lengths, prefix ids);
        ``copies``: memories holding a token's ``kv_token`` bytes alike (a system's chips);
        ``on_step``: where each step's SchedulerOutput goes (None: nowhere); ``drafting``: the
        backend's draft steps and page trims, needed when ``p`` has speculative decoding on."""
        self.p = p
        self.backend = backend
        self.on_step = on_step
        self.on_oom = cfg.on_oom
        self.swap = swap and (cfg.on_oom == "evict" or (cfg.on_oom == "preempt" and cfg.preempt_mode == "swap"))
        self.reservation = p.kv_reservation  # what an admitted request reserves (reservation.py)
        self.max_model_len = p.max_model_len
        self.aware = cfg.on_oom == "preempt" or cfg.admit_watermark > 0 or self.reservation != "paged"
        self.pages = pages  # of the KV memory, weights included
        self.limit = int((1.0 - cfg.admit_watermark) * pages)
        self.page = page
        self.kv_token = kv_token  # bytes of K and V a token adds in this memory
        arrivals = requests.arrivals()
        self.seqs = [Sequence(s, arrivals[s], *requests.lengths(s)) for s in range(p.requests)]
        self.prefix: PrefixPool | None = None
        if requests.blocks is not None:
            bt = requests.block_tokens
            self.prefix = PrefixPool(bt, requests.blocks.block_tokens, self._pages(bt), bt * kv_token * copies,
                                     cfg.prefix_cache_bytes)
        for q in self.seqs:
            q.prefill = q.prompt
            if self.prefix is not None:
                q.ids = tuple(int(i) for i in requests.prefix_ids(q.seq))
                q.pre = len(q.ids) * self.prefix.block_tokens
        self.waiting: list[int] = list(range(p.requests))
        self.running: list[int] = []  # in admission order
        self.admissions = 0
        self.pages_used = 0  # the books: pages the weights and every sequence hold
        self.held: dict[int, int] = {}  # sequence -> pages it holds
        self.steps = 0
        self.granted: dict[int, int] = {}  # since the last step's record: sequence -> pages
        self.preempted: list[int] = []  # since the last step's record
        self.ended: dict[int, str] = {}  # since the last step's record: sequence -> status
        self.progress: ProgressSink | None = None  # told each step's end (progress.py); set by the program's watch
        self.clock_hz = cfg.spec.clock_hz
        self.span = max(arrivals, default=0) / self.clock_hz  # the trace's last arrival, s
        self.speculative: Speculative | None = getattr(p, "speculative", None)  # None: off
        if self.speculative is not None and drafting is None:
            raise ValueError("speculative decoding needs a backend that runs draft steps (one chip's)")
        self.drafting = drafting
        self.seed = cfg.seed
        # bytes of the served model's K and V a token (kv_token also holds the draft model's, its cache beside)
        self.step_kv = kv_token - (self.speculative.draft.kv_bytes_per_token if self.speculative else 0)

    @property
    def now(self) -> int:
        return self.backend.now

    # ------------------------------------------------------------------ the loop
    def run(self) -> Task:
        ok = yield from self.backend.load_weights()
        weights = self.p.model.weight_bytes + (self.speculative.draft.weight_bytes if self.speculative else 0)
        self.pages_used += -(-weights // self.page)
        if not ok:
            for s in list(self.waiting):
                self.counted_admission(s)
                self.end(s, "failed")
            return
        while True:
            planned = yield from self.schedule()
            if planned is None:
                break
            done = yield from self.update(planned)
            if self.on_step is not None and done is not None:
                self.on_step(done)
        if self.prefix is not None:  # every request served: the prefix cache lets go of its blocks
            yield from self._free_blocks(self.prefix.trim(0))
        self.backend.finished(self.steps)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> Task:
        """Admit what arrived, waiting for arrivals and refusing a head that cannot fit an empty
        memory, then plan the step (its KV taken); None if no step can run."""
        while self.has_unfinished():
            yield from self._admit()
            if not self.running:
                if not self.waiting:
                    return None
                head = self.seqs[self.waiting[0]]
                if head.arrival > self.now:
                    yield from self.backend.sleep(head.arrival - self.now)
                    continue
                self.counted_admission(head.seq)
                self.end(self.waiting.pop(0), "failed")  # an empty memory and still it does not fit
                continue
            step = yield from self._plan_step()
            if step is None and not self.running:  # every running sequence failed: admit the waiting
                continue
            if step is None:  # every running sequence stalled: nothing can go on
                return None
            decode, chunks = step
            return SchedulerOutput(self.steps, self.now, self.now, tuple(decode), dict(chunks),
                                   kv_granted=dict(sorted(self.granted.items())))
        return None

    def update(self, planned: SchedulerOutput) -> Task:
        """Run the step (the backend's), make its tokens and let the finished go; None if its plan
        could not be priced (every request then failed)."""
        decode = list(planned.decode)
        chunks = list(planned.prefill.items())
        for s in decode + [s for s, _ in chunks]:
            self._holds(self.seqs[s])
        prompts = [(c, self.seqs[s].kv, self.seqs[s].filled + c >= self.seqs[s].prefill) for s, c in chunks]
        drafts = {s: self._drafts(s) for s in decode}
        if self.speculative is None:
            shape = StepShape.of([self.seqs[s].kv for s in decode], prompts)
        else:  # the verify step: each decode sequence's last token and drafts, a chunk at its context
            shape = StepShape.of([], [(drafts[s] + 1, self.seqs[s].kv, True) for s in decode] + prompts)
            shape = shape.with_logits(sum(drafts.values()) + shape.logits)
        t0 = self.now
        try:
            if self.speculative is not None:
                yield from self._draft_steps(decode, prompts, drafts)
            t_verify = self.now
            roof: Roofline = yield from self.backend.execute(shape, self.steps)
        except ValueError as exc:  # its plan does not map, fit or run: no step of this shape can
            self.backend.log(StepFailure(self.steps, str(exc)))
            for s in self.running + self.waiting:
                self.counted_admission(s)
                self.end(s, "failed")
            self.running, self.waiting = [], []
            return None
        for s, _ in chunks:  # a prefill step before the first token: its TTFT's prefill share
            self.seqs[s].prefill_cycles += 0 if self.seqs[s].token_cycles else self.now - t0
        accepted = {s: self.speculative.accepted(self.seed, s, self.steps, d) for s, d in drafts.items()} \
            if self.speculative is not None else {}
        made = self._apply(decode, chunks, accepted)
        self._written(chunks)
        if self.speculative is not None:
            yield from self._reclaim(decode, drafts, accepted, t0, t_verify)
        self.backend.record_step(self.steps, t0, made)
        if self.backend.keeps_batch_log:  # a walk over every running sequence and its prefix blocks
            self._log_batch(t0, len(decode) + len(chunks))
        written = shape.tokens * self.step_kv
        self.backend.log(StepLog(self.steps, t0, self.now, len(decode), sum(c for _, c in chunks), shape.tokens,
                                 shape.keys, shape.kv_read, made, int(roof.bytes) - written, written, int(roof.flops)))
        self.steps += 1
        if self.progress is not None:
            self.progress(Served(self.now / self.clock_hz, self.span))
        end = self.now  # its tokens made (the finished then give their pages back)
        yield from self._finish_done()
        done = SchedulerOutput(planned.step, t0, end, planned.decode, planned.prefill, made=made,
                               kv_granted=planned.kv_granted, preempted=tuple(self.preempted), ended=self.ended)
        self.granted, self.preempted, self.ended = {}, [], {}
        return done

    # ------------------------------------------------------------------ speculative decoding
    def _drafts(self, s: int) -> int:
        """Drafts decode sequence ``s`` proposes this step: k, but none past its output's last token."""
        if self.speculative is None:
            return 0
        q = self.seqs[s]
        return max(0, min(self.speculative.k, q.output - q.made - 1))

    def _draft_steps(self, decode: list[int], prompts: list[tuple[int, int, bool]], drafts: dict[int, int]) -> Task:
        """The draft model's steps before the verify step (speculative.py): step i decodes a token of every
        sequence drafting more than i at its context plus i; the first also prefills the step's prompt chunks."""
        backend = self.drafting
        assert backend is not None
        n = max(drafts.values(), default=0)
        for i in range(max(n, 1 if prompts else 0)):
            shape = StepShape.of([self.seqs[s].kv + i for s in decode if drafts[s] > i], prompts if i == 0 else [])
            if shape.tokens:
                yield from backend.execute_draft(shape, self.steps)

    def _reclaim(self, decode: list[int], drafts: dict[int, int], accepted: dict[int, int], t0: int,
                 t_verify: int) -> Task:
        """Give back the pages only the rejected drafts' KV took (each sequence's tail cut to the pages of
        its accepted length; none under a reservation ahead that holds them) and log the step's drafts
        (SpecStepLog)."""
        cuts, freed = [], 0
        for s in decode:
            q = self.seqs[s]
            keep = self._pages(self._room(q, q.kv))  # its accepted length's (or its reservation's, if ahead)
            if keep < self.held.get(s, 0):
                cuts.append((q, keep))
                freed += self.held[s] - keep
        backend = self.drafting  # never None with speculative decoding on (__init__ refuses it)
        assert backend is not None
        if cuts:
            yield from backend.trim_pages(cuts)
            for q, keep in cuts:
                self._book(q.seq, keep)
        spec = self.speculative
        assert spec is not None
        drafted, kept = sum(drafts.values()), sum(accepted.values())
        expected = sum(spec.expected_tokens(d) for d in drafts.values())
        self.backend.log(SpecStepLog(self.steps, len(decode), drafted, kept, drafted - kept, expected,
                                     t_verify - t0, (drafted - kept) * self.kv_token, freed * self.page))

    def _log_batch(self, t0: int, batch: int) -> None:
        """The step's batch and the running sequences' KV bytes reserved (their pages; a shared prefix
        block once) and written (a shared block's tokens once)."""
        pages = sum(self.held.get(s, 0) for s in self.running)
        tokens = 0
        blocks: dict[int, tuple[int, int]] = {}  # a held block -> (its pages, tokens written in it)
        for s in self.running:
            q = self.seqs[s]
            tokens += q.tail(q.kv)
            for j, b in q.blocks.items():
                wrote = min(self.pool.block_tokens, max(0, q.kv - j * self.pool.block_tokens))
                blocks[id(b)] = (b.pages, max(wrote, blocks.get(id(b), (0, 0))[1]))
        pages += sum(p for p, _ in blocks.values())
        tokens += sum(t for _, t in blocks.values())
        self.backend.log(BatchLog(self.steps, t0, self.now, batch, pages * self.page, tokens * self.kv_token))

    # ------------------------------------------------------------------ admission
    def _pages(self, tokens: int) -> int:
        return -(-tokens * self.kv_token // self.page)

    @property
    def pool(self) -> PrefixPool:
        """The prefix pool (asked for only where a sequence has prefix blocks)."""
        assert self.prefix is not None
        return self.prefix

    @property
    def _block_pages(self) -> int:
        return self.prefix.pages if self.prefix is not None else 0

    def _lacking(self, q: Sequence) -> int:
        """Pages of the prefix blocks ``q`` has yet to take."""
        return (len(q.ids) - len(q.blocks)) * self._block_pages

    def _promised(self) -> int:
        """Pages the running sequences will hold once their prefills are done (vLLM's block manager
        counts a sequence's prompt blocks when it admits it): what they hold, and what they lack."""
        more = 0
        for s in self.running:
            q = self.seqs[s]
            grown = self._pages(self._room(q, q.kv + q.prefill - q.filled))
            more += max(0, grown - self.held.get(s, 0)) + self._lacking(q)
        return self.pages_used + more

    def _room(self, q: Sequence, tokens: int) -> int:
        """Tail tokens ``q``'s region must hold for ``tokens`` KV tokens: those, or all it reserves
        when the server reserves ahead (``kv_reservation``, reservation.py)."""
        return q.tail(max(tokens, reserved_tokens(self.reservation, q.prompt, q.output, self.max_model_len)))

    def _admit(self) -> Task:
        """Admit what arrived (a task: the prefix cache may give pages back, by messages)."""
        now = self.now
        promised = self._promised() if self.aware else 0
        while self.waiting and len(self.running) < self.p.max_sequences and self.seqs[self.waiting[0]].arrival <= now:
            s = self.seqs[self.waiting[0]]
            if refused(self.reservation, s.prompt, s.output, self.max_model_len):  # its reservation cannot hold it
                self.counted_admission(s.seq)
                self.end(self.waiting.pop(0), "failed")
                continue
            hits = self.prefix.hits(s.ids) if self.prefix is not None and s.swapped < 0 else 0
            if s.swapped < 0:
                need = self._pages(self._room(s, s.prompt + s.made)) + self._lacking(s) - hits * self._block_pages
            else:
                need = self._pages(self._room(s, s.kv + 1))
            if self.aware and promised + need > self.limit:
                if self.prefix is not None and self.prefix.cached:  # the prefix cache gives its room back
                    yield from self._free_blocks(self.prefix.trim(self.prefix.cached_bytes - 1))
                    now, promised = self.now, self._promised()
                    continue
                return  # first come, first served: the head holds back those behind it
            promised += need
            self.waiting.pop(0)
            if hits:  # its first blocks are found: held, not computed
                s.blocks = dict(enumerate(self.pool.hold(s.ids, hits)))
                s.kv = s.filled = hits * self.pool.block_tokens
            if s.admitted < 0:  # its first admission (again if that one was given back: _give_back)
                s.admitted = now
                self.counted_admission(s.seq)
                if self.prefix is not None:  # logged when it runs a step: an admission given back finds again
                    s.found = self.prefix.log(s.seq, s.ids, hits)
            s.order, self.admissions = self.admissions, self.admissions + 1
            s.fresh = s.swapped < 0
            self.running.append(s.seq)

    def counted_admission(self, s: int) -> None:
        """Count a request taken from the queue for the first time (admitted, or refused)."""
        q = self.seqs[s]
        if not q.counted:
            q.counted = True
            self.backend.count("admitted")

    # ------------------------------------------------------------------ a step
    def _plan_step(self) -> Task:
        """The step's decode sequences and prefill chunks, their KV regions grown to hold what it
        adds (on_oom handled); None if nothing can run."""
        while True:
            decode = [s for s in self.running if self.seqs[s].decoding]
            budget = max(0, self.p.max_step_tokens - sum(1 + self._drafts(s) for s in decode))
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
            need = {s: 1 + self._drafts(s) for s in decode} | dict(chunks)
            if not need:
                return None
            refused = yield from self._reserve(need)
            if not refused:
                return decode, chunks
            if self.prefix is not None and self.prefix.cached:  # the prefix cache gives a block's room back
                yield from self._free_blocks(self.prefix.trim(self.prefix.cached_bytes - 1))
                continue
            if self.on_oom == "stall":  # the refused sit this step out; the others have their room
                decode = [s for s in decode if s not in refused]
                chunks = [(s, c) for s, c in chunks if s not in refused]
                return (decode, chunks) if decode or chunks else None
            if self.on_oom == "fail" or len(self.running) == 1:  # (alone on the chip and still no room: never)
                for s in refused:
                    self.running.remove(s)
                    yield from self._free(s)
                    self.end(s, "failed")
                continue
            # preempt and evict: the most recently admitted running sequence gives its room back (one admitted
            # this step with no room is given back to the queue, not preempted: _preempt)
            victim = max(self.running, key=lambda x: self.seqs[x].order)
            yield from self._preempt(victim)

    def _reserve(self, need: dict[int, int]) -> Task:
        """Have every sequence's pages hold its cache and the ``need`` tokens the step adds (a
        swapped-out cache brought back first): the set of sequences refused (what of it they got,
        they keep)."""
        for s in [s for s in need if self.seqs[s].swapped >= 0]:
            ok = yield from self._swap_in(s)
            if not ok:
                return {s}
        wants: list[tuple[int, int, Block | Sequence, int]] = []  # (sequence, block or -1: tail, region, pages more)
        for s, n in need.items():
            q = self.seqs[s]
            for j in range(len(q.ids)):  # blocks the step writes into that it has not taken yet
                if j * self.pool.block_tokens < q.kv + n and j not in q.blocks:
                    wants.append((s, j, self.pool.new(q.ids[j]), self.pool.pages))
            if q.tail(q.kv + n) > q.reserved:  # beyond its tail's last page's room
                wants.append((s, -1, q, self._pages(self._room(q, q.kv + n)) - self.held.get(s, 0)))
        if not wants:
            return set()
        got = yield from self.backend.take_pages([(region, n) for _, _, region, n in wants],
                                                self.pages - self.pages_used)
        refused = set()
        for (s, j, region, n), ok in zip(wants, got):
            if not ok:
                refused.add(s)
                continue
            self.granted[s] = self.granted.get(s, 0) + n
            if isinstance(region, Block):
                self.seqs[s].blocks[j] = region
                self.pages_used += n
            else:
                self._book(s, self.held.get(s, 0) + n)
        return refused

    def _book(self, s: int, pages: int) -> None:
        """The books: sequence ``s``'s tail holds ``pages`` pages (room for that many tokens)."""
        self.pages_used += pages - self.held.get(s, 0)
        self.held[s] = pages
        self.seqs[s].reserved = pages * self.page // self.kv_token

    def _free(self, s: int, blocks: bool = True) -> Task:
        """Give a sequence's tail pages back (the backend's memory says when they are free) and,
        unless ``blocks`` is False (a swap: they stay), let go of its prefix blocks."""
        q = self.seqs[s]
        yield from self.backend.free_pages(q)
        q.region, q.reserved = -1, 0
        self.pages_used -= self.held.pop(s, 0)
        if blocks and q.blocks:
            held, q.blocks = [q.blocks[j] for j in sorted(q.blocks)], {}
            yield from self._free_blocks(self.pool.release(held))

    def _free_blocks(self, blocks: list[Block]) -> Task:
        """Free prefix blocks' regions (the pool let go of them)."""
        for b in blocks:
            yield from self.backend.free_pages(b)
            self.pages_used -= b.pages

    # ------------------------------------------------------------------ preemption
    def _preempt(self, s: int) -> Task:
        """Preempt sequence ``s``: swap its KV out or drop it (recompute), free its pages, and put
        it first in line again; one no step has run since its admission (nothing computed) is given
        back instead, uncounted."""
        q = self.seqs[s]
        t0 = self.now
        self.running.remove(s)
        if q.swapped >= 0:  # admitted, but its KV never came back from the swap memory: in line again as it was
            self.waiting.insert(0, s)
            return
        if q.fresh:  # in no step since its admission (evict admits a head without room): it computed no KV,
            yield from self._give_back(s)  # so nothing is lost or moved and it is no preemption
            return
        nbytes = q.tail(q.kv) * self.kv_token  # under prefix sharing its blocks stay: the tail moves
        what = "recompute"
        if self.swap and q.kv and q.decoding:
            ok = yield from self.backend.swap_out(q, nbytes)
            what = "swap-out" if ok else "recompute"  # recompute: the swap memory is full too
        moved = self.now
        yield from self._free(s, blocks=q.swapped < 0)
        if q.swapped < 0:  # recompute: its prompt and the tokens it made are prefilled again
            q.filled, q.kv, q.prefill = 0, 0, q.prompt + q.made
        q.preemptions += 1
        self.preempted.append(s)
        self.backend.log(PreemptionLog(s, self.backend.unit, what, t0, moved, self.now, nbytes))
        self.waiting.insert(0, s)

    def _give_back(self, s: int) -> Task:
        """Undo the admission of a sequence no step has run since: free what pages (and found prefix
        blocks) it took and put it first in line again, as memory-aware admission would have kept it."""
        q = self.seqs[s]
        yield from self._free(s)
        q.filled = q.kv = 0  # prefix blocks found at admission were let go: found again when admitted
        if not q.preemptions:  # its first admission undone: it queues until the one that holds
            q.admitted, q.found = -1, None
        self.waiting.insert(0, s)

    def _holds(self, q: Sequence) -> None:
        """``q`` runs the step planned: its admission holds (no longer given back), its prefix figures
        at its first admission logged."""
        q.fresh = False
        self._log_found(q)

    def _log_found(self, q: Sequence) -> None:
        """``q``'s prefix figures at the admission that holds, logged once."""
        if q.found is not None:
            self.backend.log(q.found)
            q.found = None

    def _swap_in(self, s: int) -> Task:
        """Bring a swapped-out sequence's KV back; False if there is no room for it."""
        q = self.seqs[s]
        t0 = self.now
        pages, nbytes = self._pages(q.tail(q.kv)), q.tail(q.kv) * self.kv_token
        [ok] = yield from self.backend.take_pages([(q, pages)], self.pages - self.pages_used)
        if not ok:
            return False
        self._book(s, pages)
        self.granted[s] = self.granted.get(s, 0) + pages
        yield from self.backend.swap_back(q, nbytes)
        q.swapped = -1
        self.backend.log(PreemptionLog(s, self.backend.unit, "swap-in", t0, self.now, self.now, nbytes))
        return True

    # ------------------------------------------------------------------ after a step
    def _apply(self, decode: list[int], chunks: list[tuple[int, int]], accepted: dict[int, int]) -> int:
        """The step's tokens: KV grown, a token for each decode sequence (and its accepted drafts under
        speculative decoding, made at once) and each finished prefill."""
        now, made = self.now, 0
        for s in decode:
            q = self.seqs[s]
            n = 1 + accepted.get(s, 0)
            q.kv += n
            q.made += n
            q.token_cycles.extend([now] * n)
            made += n
        for s, c in chunks:
            q = self.seqs[s]
            q.kv += c
            q.filled += c
            if q.decoding:  # its prefill is done: it makes the next token
                q.made += 1
                q.token_cycles.append(now)
                made += 1
        return made

    def _written(self, chunks: list[tuple[int, int]]) -> None:
        """Prefix blocks whose every token a step has computed join the index."""
        for s, _ in chunks:
            q = self.seqs[s]
            for j, b in q.blocks.items():
                if not b.written and (j + 1) * self.pool.block_tokens <= q.kv:
                    self.pool.written(b)

    def _finish_done(self) -> Task:
        for s in [s for s in self.running if self.seqs[s].made >= self.seqs[s].output]:
            self.running.remove(s)
            yield from self._free(s)
            self.end(s, SERVED)

    def end(self, s: int, status: str) -> None:
        q = self.seqs[s]
        self._log_found(q)  # admitted and ended before any step (refused under fail): its admission's figures
        self.backend.count("finished")
        self.ended[s] = status
        self.backend.record_request(q, status)
        self.backend.log(RequestLog(s, q.arrival, q.admitted, tuple(q.token_cycles), q.preemptions, status, q.prompt,
                                    q.prefill_cycles))

"""kv-decode: continuous batching of sequences with growing KV caches.

Units: one scheduler (the CU at ``scheduler_tile``) and one worker CU per batch slot.
Every sequence owns ``2 x layers x heads`` buffers (K and V of each layer's heads),
placed on MUs by the configured placement. Iteration-level continuous batching (Orca,
Yu et al., OSDI 2022): each iteration the scheduler admits waiting sequences into free
slots (up to ``max_batch``), tells every running worker to do one step and waits for
all of them; a worker's step, layer by layer, appends the new token's K and V to each
head's buffers and reads them whole (attention), then computes; a finished sequence
frees its buffers and its slot goes to the next one. Admission allocates the buffers
(one at a time in MU order, so stalled allocations cannot deadlock each other) and
appends the prompt (prefill); it counts as the sequence's first step.

spec-decode (spec_decode.py) is this program with a step that drafts several tokens.

The scheduler (sim/serving/scheduling/slot.py) may admit by memory and, under ``memory.on_oom =
"preempt"``, preempt: a step whose append an MU refuses stops at that layer (``BlockedStep``)
and goes on when told to; a preempted worker frees its KV, first streaming it to DRAM under
``swap``; a swapped-out sequence admitted again has its KV streamed back into new buffers.

All buffers here have a single owner, so they are freed explicitly; reclamation
protocols matter for moe and race.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sim.chip import messages as m
from sim.chip.records import buffer_label
from sim.chip.references import Ref, free, free_all, received
from sim.chip.spec import CU, home_drams
from sim.chip.units import Compute, Replies
from sim.keys import Field, Issue, Table
from sim.serving.lengths import (
    Dist,
    dist_of,
    dist_table,
)
from sim.serving.metrics import Objectives, PreemptionLog, RequestLog, prompt_figures, serving_figures
from sim.serving.prefix_sharing import (
    KV_PREFIX,
    PrefixLog,
    inbox,
    prefix_figures,
    share_written,
    take_shared,
)
from sim.serving.requests import Requests, prefix_block_issues, trace_of
from sim.serving.scheduling.slot import SlotScheduler
from sim.serving.trace import RequestTrace
from sim.serving.trace_formats import NAMES as TRACE_FORMATS
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.base import Floorplan, attention_cycles, tile_field, tile_id, tile_of
from sim.workloads.capabilities import Capabilities

KV_BUFFER = buffer_label(1, "kv")


@WORKLOADS.register("kv-decode")
@dataclass(frozen=True)
class KvParams(Workload):
    kind: str = "kv-decode"
    requests: int = 32
    max_batch: int = 16
    layers: int = 2
    heads: int = 2
    head_dim: int = 64
    dtype_bytes: int = 2
    prompt: Dist = field(default_factory=lambda: Dist("uniform", 128, 32, 256))
    output: Dist = field(default_factory=lambda: Dist("uniform", 64, 16, 128))
    arrival_interval: int = 0  # mean cycles between arrivals (exponential); 0 = all at cycle 0
    scheduler_tile: int = 0
    trace: RequestTrace | None = None  # arrivals and lengths from a trace instead of the distributions
    trace_jitter: int = 0  # cycles: each trace arrival moves later by a uniform draw in [0, this) (0: none)
    slo_ttft: float = 0.0  # latency objectives, s (0: none): time to first token, mean time between tokens
    slo_tbt: float = 0.0
    prefix_block_tokens: int = 0  # tokens of a shared prefix block (0: the trace's block)

    SECTION: ClassVar[str] = "decode"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False, preempts=True)
    TABLES: ClassVar[tuple[str, ...]] = ("run_requests",)  # its requests' latencies
    WORK_UNIT: ClassVar[str] = "sequences"
    token_unit: ClassVar[str] = "generated tokens"  # output tokens (a prompt's are not counted)
    KEYS: ClassVar[Table]  # set below the class (it reads the defaults)

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "KvParams":
        spec, lay = chip.on_chip()
        sched = tile_of(d["scheduler_tile"], "workload.decode.scheduler_tile", spec, lay, CU, issues)
        n_cu = len(lay.cus)
        if d["max_batch"] > n_cu - 1:
            issues.append(Issue("workload.decode.max_batch", f"{d['max_batch']} sequences need that many worker CUs; "
                                f"the chip has {n_cu - 1} besides the scheduler"))
        trace = trace_of(d, spec.clock_hz, issues)
        if not d["trace"] and d["requests"] < 1:
            issues.append(Issue("workload.decode.requests", "must be at least 1 (0 means all of a trace)"))
        prefix_block_issues(d, trace, issues)
        return cls(kind=kind, requests=len(trace.arrivals) if trace else d["requests"], max_batch=d["max_batch"],
                   layers=d["layers"], heads=d["heads"], head_dim=d["head_dim"], dtype_bytes=d["dtype_bytes"],
                   prompt=dist_of(d["prompt_tokens"], "workload.decode.prompt_tokens", issues),
                   output=dist_of(d["output_tokens"], "workload.decode.output_tokens", issues),
                   arrival_interval=d["arrival_interval"], scheduler_tile=tile_id(sched, spec),
                   trace=trace, slo_ttft=d["slo_ttft"] or 0.0,
                   slo_tbt=d["slo_tbt"] or 0.0, prefix_block_tokens=d["prefix_block_tokens"],
                   trace_jitter=round(d["trace_jitter"] * spec.clock_hz / d["trace_speedup"]) if trace else 0,
                   **cls.kind_fields(d))

    @classmethod
    def kind_fields(cls, d: dict) -> dict:
        """The fields a kind built on this one reads from its own keys (none here)."""
        return {}

    @property
    def work_items(self) -> int:
        return self.requests

    def program(self, cfg) -> "KvDecode":
        return KvDecode(self, cfg)

    @property
    def token_bytes(self) -> int:
        """Bytes one token adds to one head's K (or V) buffer."""
        return self.head_dim * self.dtype_bytes

    @property
    def buffers_per_sequence(self) -> int:
        return 2 * self.layers * self.heads

    def serving_figures(self, logged: list, clock_hz: float, seconds: float) -> tuple[dict, dict]:
        """Each request's token times, the latency percentiles, goodput and preemptions (sim/serving/metrics.py)."""
        reqs = [x for x in logged if isinstance(x, RequestLog)]
        moves = [x for x in logged if isinstance(x, PreemptionLog)]
        summary, tables = serving_figures(reqs, moves, clock_hz, seconds, Objectives(self.slo_ttft, self.slo_tbt))
        summary.update(prefix_figures([x for x in logged if isinstance(x, PrefixLog)]))
        summary.update(prompt_figures(reqs))
        return summary, tables

    def input_figures(self, cfg) -> dict:
        """What the run took from its trace (nothing without one)."""
        t = self.trace
        if t is None:
            return {}
        return {"trace_requests": len(t.arrivals), "trace_capped_prompts": t.capped_prompts,
                "trace_capped_outputs": t.capped_outputs, "trace_arrival_rate": t.arrival_rate,
                "trace_format": t.format, "trace_failed_skipped": t.failed, "trace_note": t.note or None}


def _keys(d: KvParams) -> Table:
    def i(doc, default, lo=1, unit=""):
        return Field("int", default, doc, min=lo, unit=unit)

    return Table({
        "requests": i("sequences to serve (with a trace: at most this many, from the window's start; 0: all)",
                      d.requests, 0),
        "max_batch": i("sequences running at once (one worker CU each)", d.max_batch),
        "layers": i("layers", d.layers),
        "heads": i("KV heads per layer", d.heads),
        "head_dim": i("head dimension", d.head_dim),
        "dtype_bytes": i("bytes per element", d.dtype_bytes, unit="bytes"),
        "prompt_tokens": dist_table(d.prompt),
        "output_tokens": dist_table(d.output),
        "arrival_interval": i("mean cycles between arrivals (exponential); 0: all at once", 0, 0, "cycles"),
        "scheduler_tile": tile_field([0, 0], "[row, col] of the scheduler CU"),
        "trace": Field("str", "", "request trace replacing the drawn arrivals and lengths, as published: Azure "
                       "2023-2025 CSV, Mooncake or Qwen-Bailian JSON lines, BurstGPT CSV (gzipped too), or Parquet "
                       "with one of their columns (docs/traces.md)", file=True),
        "trace_format": Field("choice", "auto", "trace: its format (auto: told by its columns)",
                              choices=("auto",) + TRACE_FORMATS),
        "trace_model": Field("str", "", "trace (burstgpt): only the requests of this Model, e.g. \"ChatGPT\" or "
                             "\"GPT-4\" (empty: all)"),
        "trace_start": Field("time", 0.0, "trace: start of the window after the first arrival", min=0.0, unit="s"),
        "trace_duration": Field("time", 0.0, "trace: length of the window (0: to the end)", min=0.0, unit="s"),
        "trace_speedup": Field("float", 1.0, "trace: arrival-rate scale (gaps between arrivals are divided by it)",
                               min=1e-12),
        "trace_jitter": Field("time", 0.0, "trace: each arrival moves later by a uniform random time in [0, this) "
                              "of the trace's time (drawn from run.seed; sorted again): replicas of a short trace "
                              "for a percentile (benchmarks/serving_capacity.py); 0: none", min=0.0, unit="s"),
        "max_prompt_tokens": i("trace: longer prompts are cut to this (counted; 0: no cap)", 0, 0),
        "max_output_tokens": i("trace: longer outputs are cut to this (counted; 0: no cap)", 0, 0),
        "prefix_block_tokens": i("trace with prompt blocks (memory.prefix_sharing): tokens of a shared KV block, a "
                                 "multiple of the trace's (512 Mooncake, 16 Qwen-Bailian); 0: the trace's", 0, 0),
        "slo_ttft": Field("duration", None, "latency objective on the time to first token, with its unit (e.g. "
                          "\"200ms\"): goodput counts the requests that meet it and slo_tbt (unset: none)"),
        "slo_tbt": Field("duration", None, "latency objective on a request's mean time between tokens, with its "
                         "unit (e.g. \"20ms\") (unset: none)"),
    }, doc="kv-decode and spec-decode")


KvParams.KEYS = _keys(KvParams())


@dataclass
class BlockedStep:
    """A step an MU refused to grow a buffer for (memory.on_oom = "preempt"): where it stopped."""

    layer: int
    new: int  # tokens the step appends
    refused: list[int]  # buffers whose append was refused (to be sent again)
    reads: dict[int, int]  # buffer -> tag of its read, still waiting at the MU for the refused append


class KvDecode(Requests):
    """The program every CU of a kv-decode run executes (spec-decode's builds on it)."""

    def __init__(self, p: KvParams, cfg):
        self.p = p
        self.cfg = cfg
        self.grid = Floorplan(cfg)
        self.scheduler = self.grid.unit_at(*divmod(p.scheduler_tile, cfg.spec.cols))
        cus = [int(c) for c in self.grid.cus if c != self.scheduler]
        self.workers = cus[: p.max_batch]
        self.flops = cfg.spec.cu_flops_per_cycle
        self.preempt = cfg.on_oom == "preempt"
        self.home_dram = home_drams(cfg.spec, self.grid.lay)
        self.share_prefixes(cfg.prefix_sharing)
        most = max((len(self.prefix_ids(s)) for s in range(p.requests)), default=0) if self.blocks is not None else 0
        self.stride = (most + 1) * p.buffers_per_sequence  # a written block's reference tag: admission x stride + ...

    def prefix_index(self):
        """The scheduler's index of shared blocks (None without prefix sharing)."""
        if self.blocks is None:
            return None
        from sim.serving.prefix_sharing import PrefixIndex

        return PrefixIndex(self.cfg.reclaim, self.p.buffers_per_sequence, self.block_tokens,
                           self.blocks.block_tokens, self.p.token_bytes, self.stride, self.cfg.prefix_cache_bytes)

    # ------------------------------------------------------------------ pure facts
    def steps_before(self, seq: int, made: int) -> int:
        """Steps after its prefill a sequence took to make ``made`` tokens (where a preempted one
        goes on: its draws of accepted drafts are keyed by step)."""
        return max(made - 1, 0)

    @property
    def step_tokens(self) -> int:
        """Tokens a decode step appends to every buffer."""
        return 1

    def placement(self, slot: int, seq: int) -> list[int]:
        """The MU of each of sequence ``seq``'s buffers when it runs in ``slot``."""
        nb = self.p.buffers_per_sequence
        return [self.grid.place(self.workers[slot], slot, b, nb, seq) for b in range(nb)]

    def block_placement(self, slot: int, seq: int, block: int) -> list[int]:
        """The MU of each buffer of the ``block``-th prefix block ``seq`` writes in ``slot``: placed
        as further buffers of the sequence would be (a paged KV's blocks go wherever there is room)."""
        nb = self.p.buffers_per_sequence
        return [self.grid.place(self.workers[slot], slot, b + nb * (block + 1), nb, seq) for b in range(nb)]

    # ------------------------------------------------------------------ program entry points
    def start(self, cu):
        if cu.uid == self.scheduler:
            cu.state["scheduler"] = sched = SlotScheduler(self, cu, cu.shard.log if self.cfg.trace else None)
            return sched.run()
        return None

    def on_message(self, cu, msg):
        if msg.kind == m.REFERENCE:  # prefix sharing: a block's reference for the index, or for an admission
            if cu.uid == self.scheduler:
                cu.state["scheduler"].prefix.arrived(cu, msg)
            else:
                inbox(cu, msg)
            return None
        if msg.kind == m.CONTROL and msg.arg in (m.CTRL_ADMIT, m.CTRL_STEP):
            return self._work(cu, msg)
        if msg.kind == m.CONTROL and msg.arg == m.CTRL_RESUME:
            return self._layers(cu, msg, cu.state.pop("blocked"))
        if msg.kind == m.CONTROL and msg.arg == m.CTRL_PREEMPT:
            return self._preempt(cu, msg)
        raise RuntimeError(f"kv-decode CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")

    # ------------------------------------------------------------------ worker
    def _allocate(self, cu, mus: list[int], nbytes: list[int], labels: list[int]):
        """Task: buffer i of ``nbytes[i]`` at ``mus[i]``, one at a time in increasing MU order, so that
        sequences waiting for memory never wait for each other in a cycle (ordered resource
        acquisition, Havender 1968); stops at the first refusal. Returns (refs, status)."""
        refs: list[Ref | None] = [None] * len(mus)
        for b in sorted(range(len(mus)), key=lambda i: (mus[i], i)):
            tag = cu.request(m.ALLOC, mus[b], nbytes=nbytes[b], arg=labels[b], mu=mus[b], flags=0)
            got = yield Replies([tag], "memory")
            if got[tag].status != m.STATUS_OK:
                return refs, got[tag].status
            refs[b] = received(cu, got[tag])
        return refs, m.STATUS_OK

    def _work(self, cu, msg):
        p, st = self.p, cu.state
        seq, slot = msg.buf, msg.nbytes
        tb = p.token_bytes
        if msg.arg == m.CTRL_ADMIT:
            prompt, out = self.lengths(seq)
            made = max(msg.alloc, 0)  # tokens it made before it was preempted
            swapped = msg.mu if self.preempt else -1  # swap: the slot its KV left from
            kv = prompt + made - (1 if swapped >= 0 else 0)
            ids, nb, hits = self.prefix_ids(seq), p.buffers_per_sequence, msg.status  # status: blocks shared with it
            shared = (yield from take_shared(cu, hits * nb)) if hits else []
            mus = self.placement(slot, seq)
            pre = len(ids) * self.block_tokens  # KV tokens in prefix blocks (0 without sharing)
            wrote = [mu for j in range(hits, len(ids)) for mu in self.block_placement(slot, seq, j)]  # it writes
            refs, status = yield from self._allocate(
                cu, mus + wrote, [(kv - pre) * tb] * nb + [self.block_tokens * tb] * len(wrote),
                [KV_BUFFER] * nb + [KV_PREFIX] * len(wrote))
            st.update(seq=seq, refs=refs, prefix=[shared[j * nb:(j + 1) * nb] for j in range(hits)], pre=pre,
                      length=0, goal=out, made=made, step=self.steps_before(seq, made))
            if status == m.STATUS_NO_ROOM:  # preempt: back in line until room is freed
                yield from self._end(cu, msg, m.NO_ROOM, 0)
                return
            if status != m.STATUS_OK:
                yield from self._end(cu, msg, m.FAILED, 0)
                return
            st["refs"], own = refs[:nb], refs[nb:]
            for r in own:  # the blocks no running sequence holds: computed and written
                cu.send(m.APPEND, r.mu, nbytes=self.block_tokens * tb, mu=r.mu, buf=r.buf, alloc=r.alloc)
            yield from share_written(cu, self.scheduler, own, [self.scheduler_tag(msg.tag, hits + i // nb, i % nb)
                                                               for i in range(len(own))], self.cfg.reclaim)
            st["prefix"] += [own[j * nb:(j + 1) * nb] for j in range(len(own) // nb)]
            refs = st["refs"]
            if swapped >= 0:
                yield from self._swap_in(cu, self.placement(swapped, seq), (kv - pre) * tb)
                st["length"] = kv
                cu.send(m.ACK, msg.src, tag=msg.tag, arg=m.RUNNING, nbytes=0)
                return
            for r in refs:
                cu.send(m.APPEND, r.mu, nbytes=(kv - pre) * tb, mu=r.mu, buf=r.buf, alloc=r.alloc)
            st["length"] = kv
            new = 1  # prefill produces the first token
        else:
            new = self.step_tokens
        if self.preempt:
            yield from self._layers(cu, msg, BlockedStep(0, new if msg.arg == m.CTRL_STEP else 0, [], {}))
            return
        refs = st["refs"]
        length = st["length"] + (new if msg.arg == m.CTRL_STEP else 0)
        heads = p.heads
        for layer in range(p.layers):
            tags = []
            for r in refs[2 * layer * heads: 2 * (layer + 1) * heads]:
                if msg.arg == m.CTRL_STEP:
                    cu.send(m.APPEND, r.mu, nbytes=new * tb, mu=r.mu, buf=r.buf, alloc=r.alloc)
                tags.append(cu.request(m.READ_REQ, r.mu, nbytes=(length - st["pre"]) * tb, mu=r.mu, buf=r.buf,
                                       alloc=r.alloc))
            tags += self._prefix_reads(cu, layer).values()
            got = yield Replies(tags, "memory")
            if any(x.status != m.STATUS_OK for x in got.values()):
                yield from self._end(cu, msg, m.FAILED, 0)
                return
            yield Compute(attention_cycles(length, heads, p.head_dim, self.flops))
        yield from self._step_done(cu, msg, length)

    def _step_done(self, cu, msg, length: int):
        """After the last layer: the step's tokens are kept (``_verified``) and go to the scheduler."""
        st = cu.state
        made, length = self._verified(cu, msg, length)
        st["length"] = length
        st["step"] += 1
        made = min(made, st["goal"] - st["made"])
        st["made"] += made
        yield from self._end(cu, msg, m.FINISHED if st["made"] >= st["goal"] else m.RUNNING, made)

    def _verified(self, cu, msg, length: int) -> tuple[int, int]:
        """Tokens the step made and the KV length it keeps: one token, all of it."""
        return 1, length

    def _end(self, cu, msg, status: int, made: int):
        """Reply to the scheduler; a sequence that ends frees its buffers first (under preempt, and
        for an admission that found no room, the scheduler hears once the MUs have freed them)."""
        st = cu.state
        if status != m.RUNNING and status != m.BLOCKED:
            refs = [r for r in st.get("refs") or [] if r is not None]
            self._drop_prefix(cu)
            if self.preempt:
                yield from free_all(cu, refs)
            else:
                for r in refs:
                    free(cu, r)
            st.clear()
        cu.send(m.ACK, msg.src, tag=msg.tag, arg=status, nbytes=made)

    # ------------------------------------------------------------------ preemption (memory.on_oom = "preempt")
    def _layers(self, cu, msg, at: BlockedStep):
        """A step (or prefill) from layer ``at.layer`` on, its appends answered: an MU refuses one
        it has no room for, and the step stops there, blocked, until the scheduler has freed room."""
        p, st = self.p, cu.state
        tb, heads, refs = p.token_bytes, p.heads, st["refs"]
        length = st["length"] + at.new
        for layer in range(at.layer, p.layers):
            mine = range(2 * layer * heads, 2 * (layer + 1) * heads)
            resumed = layer == at.layer and bool(at.reads)  # its other buffers have answered already
            reads = dict(at.reads) if resumed else {}
            appends = {}
            for b in at.refused if resumed else mine if at.new else ():
                r = refs[b]
                appends[cu.request(m.APPEND, r.mu, nbytes=at.new * tb, mu=r.mu, buf=r.buf, alloc=r.alloc)] = b
                if b not in reads:
                    reads[b] = cu.request(m.READ_REQ, r.mu, nbytes=(length - st["pre"]) * tb, mu=r.mu, buf=r.buf,
                                          alloc=r.alloc)
            if not at.new:  # a prefill: its appends went with the allocation
                for b in mine:
                    r = refs[b]
                    reads[b] = cu.request(m.READ_REQ, r.mu, nbytes=(length - st["pre"]) * tb, mu=r.mu, buf=r.buf,
                                          alloc=r.alloc)
            if not resumed:  # the layer's prefix blocks (read once: they take no appends)
                reads.update(self._prefix_reads(cu, layer))
            refused, failed = yield from self._await_layer(cu, reads, appends)
            if failed:  # a buffer larger than any MU can hold: the sequence can never go on
                yield from self._end(cu, msg, m.FAILED, 0)
                return
            if refused:
                st["blocked"] = BlockedStep(layer, at.new, refused, {b: reads[b] for b in refused})
                yield from self._end(cu, msg, m.BLOCKED, 0)
                return
            yield Compute(attention_cycles(length, heads, p.head_dim, self.flops))
        yield from self._step_done(cu, msg, length)

    @staticmethod
    def _await_layer(cu, reads: dict[int, int], appends: dict[int, int]):
        """Task: wait until every buffer of a layer is settled: its read answered with its data, or its
        append refused for lack of memory (its read then waits on at its MU). Returns (the refused,
        whether any failed for good)."""
        waiting = {t: b for b, t in reads.items()}
        asked = dict(appends)
        refused: list[int] = []
        failed = False
        while waiting:
            got = yield Replies(list(waiting) + list(asked), "memory", first=True)
            for tag, r in got.items():
                failed |= r.status == m.STATUS_FAILED
                if tag in asked:  # only a refusal answers an append
                    b = asked.pop(tag)
                    refused.append(b)
                    waiting.pop(reads[b], None)
                else:
                    waiting.pop(tag, None)
        return sorted(refused), failed

    def scheduler_tag(self, admission: int, block: int, buffer: int) -> int:
        """The tag of a written block's reference for the scheduler's index (PrefixIndex.reference_tag)."""
        return admission * self.stride + block * self.p.buffers_per_sequence + buffer

    def _prefix_reads(self, cu, layer: int) -> dict:
        """Read requests of a layer's prefix blocks: {(buffer, block): tag} (none without sharing)."""
        st, heads, tb = cu.state, self.p.heads, self.p.token_bytes
        out = {}
        for j, blk in enumerate(st["prefix"]):
            for b in range(2 * layer * heads, 2 * (layer + 1) * heads):
                r = blk[b]
                out[(b, j)] = cu.request(m.READ_REQ, r.mu, nbytes=self.block_tokens * tb, mu=r.mu, buf=r.buf,
                                         alloc=r.alloc)
        return out

    def _drop_prefix(self, cu) -> None:
        """Let go of every prefix block reference the sequence holds, as the protocol drops them."""
        for blk in cu.state.pop("prefix", None) or []:
            for r in blk:
                self.cfg.reclaim.drop(cu, r)

    def _preempt(self, cu, msg):
        """Give the sequence's room back: swap writes its KV to DRAM first (each buffer from its MU
        to the MU's DRAM interface); then its buffers are freed. Its step, if blocked, is dropped
        (its KV keeps the tokens of the steps it finished)."""
        st, p = cu.state, self.p
        t0, refs, kv = cu.shard.now, st["refs"], (st["length"] - st["pre"]) * p.token_bytes
        mode = self.cfg.preempt_mode
        if mode == "swap":
            tags = [cu.request(m.CONTROL, r.mu, arg=m.CTRL_STREAM, nbytes=kv, buf=int(self.home_dram[r.mu]))
                    for r in refs]
            yield Replies(tags, "memory")
        moved = cu.shard.now
        blocked = st.pop("blocked", None)
        self._drop_prefix(cu)  # its shared blocks: another admission finds them, if still held, or writes them again
        yield from free_all(cu, refs)
        if blocked is not None and blocked.reads:  # the reads it left waiting are answered by the free
            yield Replies(list(blocked.reads.values()), "memory")
        what = "swap-out" if mode == "swap" else "recompute"
        cu.shard.log(PreemptionLog(st["seq"], cu.uid, what, t0, moved, cu.shard.now, kv * len(refs)))
        cu.shard.trace_span(cu.uid, f"preempted: {what}", t0, cu.shard.now - t0, "memory", {"sequence": st["seq"]})
        st.clear()
        cu.send(m.ACK, msg.src, tag=msg.tag, arg=m.PREEMPTED, nbytes=0)

    def _swap_in(self, cu, old_mus: list[int], nbytes: int):
        """Task: read a swapped-out KV back from the DRAM interfaces it went to into the new buffers,
        and wait until every MU holds it."""
        st = cu.state
        t0, refs = cu.shard.now, st["refs"]
        for r, old in zip(refs, old_mus):
            cu.send(m.CONTROL, int(self.home_dram[old]), arg=m.CTRL_LOAD, nbytes=nbytes, mu=r.mu, buf=r.buf,
                    alloc=r.alloc)
        tags = [cu.request(m.READ_REQ, r.mu, nbytes=0, arg=nbytes, mu=r.mu, buf=r.buf, alloc=r.alloc) for r in refs]
        yield Replies(tags, "memory")
        now = cu.shard.now
        cu.shard.log(PreemptionLog(st["seq"], cu.uid, "swap-in", t0, now, now, nbytes * len(refs)))
        cu.shard.trace_span(cu.uid, "swap in", t0, cu.shard.now - t0, "memory", {"sequence": st["seq"]})

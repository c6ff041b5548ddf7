"""kv-decode and spec-decode: continuous batching of sequences with growing KV caches.

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

spec-decode (speculative decoding, Leviathan et al., ICML 2023): a step appends
``draft + 1`` tokens, the target verifies them, ``a`` of the ``draft`` are accepted
(each with probability ``accept``, stopping at the first rejection) and the rejected
``draft - a`` are truncated from every KV buffer; the step yields ``a + 1`` tokens.

All buffers here have a single owner, so they are freed explicitly; reclamation
protocols matter for moe and race.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from sim import rng
from sim.chip import messages as m
from sim.chip.records import buffer_label
from sim.chip.references import allocate, free
from sim.chip.spec import CU
from sim.chip.units import Compute, ComputeUnit, Replies, Sleep
from sim.keys import Field, Issue, Table
from sim.workloads import WORKLOADS, ChipContext, Task, Workload
from sim.workloads.base import (
    STREAM_ACCEPT,
    STREAM_ARRIVAL,
    STREAM_OUTPUT,
    STREAM_PROMPT,
    Dist,
    Floorplan,
    attention_cycles,
    dist_of,
    dist_table,
    tile_field,
    tile_id,
    tile_of,
)
from sim.workloads.request_trace import RequestTrace, TraceError, take
from sim.workloads.request_window import read_window

KV_BUFFER = buffer_label(1, "kv")


@WORKLOADS.register("spec-decode")
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
    draft: int = 4  # spec-decode
    accept: float = 0.7  # spec-decode
    trace: RequestTrace | None = None  # arrivals and lengths from a trace instead of the distributions

    SECTION: ClassVar[str] = "decode"
    SYSTEM: ClassVar[bool] = False
    MAPS_GRAPH: ClassVar[bool] = False
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
        trace = _trace_of(d, spec.clock_hz, issues)
        if trace is None and d["requests"] < 1:
            issues.append(Issue("workload.decode.requests", "must be at least 1 (0 means all of a trace)"))
        return cls(kind=kind, requests=len(trace.arrivals) if trace else d["requests"], max_batch=d["max_batch"],
                   layers=d["layers"], heads=d["heads"], head_dim=d["head_dim"], dtype_bytes=d["dtype_bytes"],
                   prompt=dist_of(d["prompt_tokens"], "workload.decode.prompt_tokens", issues),
                   output=dist_of(d["output_tokens"], "workload.decode.output_tokens", issues),
                   arrival_interval=d["arrival_interval"], scheduler_tile=tile_id(sched, spec),
                   draft=d["draft"], accept=d["accept"], trace=trace)

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

    def input_figures(self, cfg) -> dict:
        """What the run took from its trace (nothing without one)."""
        t = self.trace
        if t is None:
            return {}
        return {"trace_requests": len(t.arrivals), "trace_capped_prompts": t.capped_prompts,
                "trace_capped_outputs": t.capped_outputs, "trace_arrival_rate": t.arrival_rate}


def _trace_of(d: dict, clock_hz: float, issues: list[Issue]) -> RequestTrace | None:
    """The run's requests from ``workload.decode.trace``, if it names a file."""
    if not d["trace"]:
        return None
    try:
        window = read_window(d["trace"], d["trace_start"], d["trace_duration"], d["requests"])
        return take(window, clock_hz, d["trace_speedup"], d["max_prompt_tokens"], d["max_output_tokens"])
    except TraceError as exc:
        issues.append(Issue("workload.decode.trace", str(exc)))
        return None


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
        "draft": i("spec-decode: draft tokens per step", d.draft),
        "accept": Field("float", d.accept, "spec-decode: acceptance probability of each draft token", min=0.0,
                        max=1.0),
        "trace": Field("str", "", "request trace replacing the drawn arrivals and lengths: Azure LLM inference "
                       "CSV, or CSV/Parquet with TIMESTAMP, ContextTokens, GeneratedTokens (docs/traces.md)",
                       file=True),
        "trace_start": Field("time", 0.0, "trace: start of the window after the first arrival", min=0.0, unit="s"),
        "trace_duration": Field("time", 0.0, "trace: length of the window (0: to the end)", min=0.0, unit="s"),
        "trace_speedup": Field("float", 1.0, "trace: arrival-rate scale (gaps between arrivals are divided by it)",
                               min=1e-12),
        "max_prompt_tokens": i("trace: longer prompts are cut to this (counted; 0: no cap)", 0, 0),
        "max_output_tokens": i("trace: longer outputs are cut to this (counted; 0: no cap)", 0, 0),
    }, doc="kv-decode and spec-decode")


KvParams.KEYS = _keys(KvParams())


class KvDecode:
    """The program every CU of a kv-decode or spec-decode run executes."""

    def __init__(self, p: KvParams, cfg):
        self.p = p
        self.cfg = cfg
        self.grid = Floorplan(cfg)
        self.spec_decode = p.kind == "spec-decode"
        self.scheduler = self.grid.unit_at(*divmod(p.scheduler_tile, cfg.spec.cols))
        cus = [int(c) for c in self.grid.cus if c != self.scheduler]
        self.workers = cus[: p.max_batch]
        self.flops = cfg.spec.cu_flops_per_cycle

    # ------------------------------------------------------------------ pure facts
    def lengths(self, seq: int) -> tuple[int, int]:
        if self.p.trace is not None:
            return self.p.trace.prompt[seq], self.p.trace.output[seq]
        s = self.cfg.seed
        return max(1, self.p.prompt.draw(s, STREAM_PROMPT, seq)), max(1, self.p.output.draw(s, STREAM_OUTPUT, seq))

    def arrivals(self) -> list[int]:
        if self.p.trace is not None:
            return list(self.p.trace.arrivals)
        if self.p.arrival_interval <= 0:
            return [0] * self.p.requests
        u = rng.uniform(self.cfg.seed, STREAM_ARRIVAL, 0, np.arange(self.p.requests))
        gaps = -self.p.arrival_interval * np.log1p(-u)
        return [int(x) for x in gaps.cumsum()]

    def accepted(self, seq: int, step: int) -> int:
        """Draft tokens accepted: each with probability ``accept``, up to the first rejection."""
        a = 0
        for i in range(self.p.draft):
            if float(rng.uniform(self.cfg.seed, STREAM_ACCEPT, seq, step * 64 + i)) >= self.p.accept:
                break
            a += 1
        return a

    # ------------------------------------------------------------------ program entry points
    def start(self, cu):
        if cu.uid == self.scheduler:
            return self._schedule(cu)
        return None

    def on_message(self, cu, msg):
        if msg.kind == m.CONTROL and msg.arg in (m.CTRL_ADMIT, m.CTRL_STEP):
            return self._work(cu, msg)
        raise RuntimeError(f"kv-decode CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")

    # ------------------------------------------------------------------ scheduler
    def _schedule(self, cu: ComputeUnit) -> Task:
        """Iteration-level batching. Admissions run on the side (a stalled one, waiting for
        memory that running sequences hold, must not hold up their steps); a sequence
        joins the iterations once its prefill has replied."""
        shard = cu.shard
        arrive = self.arrivals()
        waiting = list(range(self.p.requests))
        free_slots = list(range(len(self.workers)))
        running: dict[int, int] = {}  # slot -> sequence
        admitting: dict[int, tuple[int, int]] = {}  # reply tag -> (slot, sequence)
        tokens: dict[int, int] = {}

        def settle(slot: int, seq: int, r) -> None:
            tokens[seq] = tokens.get(seq, 0) + r.nbytes
            if r.arg == m.RUNNING:
                running[slot] = seq
                return
            free_slots.append(slot)
            free_slots.sort()
            shard.counts["finished"] += 1
            shard.record("request", seq, arrive[seq], shard.now, tokens[seq], "ok" if r.arg == m.FINISHED else "failed")

        while waiting or running or admitting:
            while waiting and free_slots and arrive[waiting[0]] <= shard.now:
                seq, slot = waiting.pop(0), free_slots.pop(0)
                shard.counts["admitted"] += 1
                tag = cu.request(m.CONTROL, self.workers[slot], arg=m.CTRL_ADMIT, buf=seq, nbytes=slot)
                admitting[tag] = (slot, seq)
            for tag in list(admitting):
                r = cu.arrived(tag)
                if r is not None:
                    settle(*admitting.pop(tag), r)
            if running:
                t0 = shard.now
                tags = {cu.request(m.CONTROL, self.workers[slot], arg=m.CTRL_STEP, buf=seq, nbytes=slot): slot
                        for slot, seq in sorted(running.items())}
                got = yield Replies(list(tags), "control")
                shard.record("step", t0, t0, shard.now, sum(r.nbytes for r in got.values()), "ok")
                for tag, slot in sorted(tags.items(), key=lambda x: x[1]):
                    settle(slot, running.pop(slot), got[tag])
            elif admitting:
                got = yield Replies(list(admitting), "control", first=True)
                for tag, r in sorted(got.items()):
                    settle(*admitting.pop(tag), r)
            elif waiting:
                yield Sleep(max(1, arrive[waiting[0]] - shard.now))

    # ------------------------------------------------------------------ worker
    def _work(self, cu, msg):
        p, st = self.p, cu.state
        seq, slot = msg.buf, msg.nbytes
        tb = p.token_bytes
        if msg.arg == m.CTRL_ADMIT:
            prompt, out = self.lengths(seq)
            nb = p.buffers_per_sequence
            mus = [self.grid.place(cu.uid, slot, b, nb, seq) for b in range(nb)]
            # one at a time, in increasing MU order: sequences that wait for memory then never
            # wait for each other in a cycle (ordered resource acquisition, Havender 1968)
            refs = [None] * nb
            for b in sorted(range(nb), key=lambda i: (mus[i], i)):
                refs[b] = yield from allocate(cu, mus[b], prompt * tb, KV_BUFFER)
                if refs[b] is None:
                    break
            st.update(seq=seq, refs=refs, length=0, goal=out, made=0, step=0)
            if any(r is None for r in refs):
                return self._finish(cu, msg, m.FAILED, 0)
            for r in refs:
                cu.send(m.APPEND, r.mu, nbytes=prompt * tb, mu=r.mu, buf=r.buf, alloc=r.alloc)
            st["length"] = prompt
            new = 1  # prefill produces the first token
        else:
            new = 1 + p.draft if self.spec_decode else 1
        refs = st["refs"]
        length = st["length"] + (new if msg.arg == m.CTRL_STEP else 0)
        heads = p.heads
        for layer in range(p.layers):
            tags = []
            for r in refs[2 * layer * heads: 2 * (layer + 1) * heads]:
                if msg.arg == m.CTRL_STEP:
                    cu.send(m.APPEND, r.mu, nbytes=new * tb, mu=r.mu, buf=r.buf, alloc=r.alloc)
                tags.append(cu.request(m.READ_REQ, r.mu, nbytes=length * tb, mu=r.mu, buf=r.buf, alloc=r.alloc))
            got = yield Replies(tags, "memory")
            if any(x.status != m.STATUS_OK for x in got.values()):
                return self._finish(cu, msg, m.FAILED, 0)
            yield Compute(attention_cycles(length, heads, p.head_dim, self.flops))
        made = 1
        if self.spec_decode and msg.arg == m.CTRL_STEP:
            a = self.accepted(seq, st["step"])
            made = a + 1
            keep = length - (p.draft - a)
            if keep < length:
                for r in refs:
                    cu.send(m.TRUNCATE, r.mu, arg=keep * tb, mu=r.mu, buf=r.buf, alloc=r.alloc)
            length = keep
        st["length"] = length
        st["step"] += 1
        made = min(made, st["goal"] - st["made"])
        st["made"] += made
        status = m.FINISHED if st["made"] >= st["goal"] else m.RUNNING
        return self._finish(cu, msg, status, made)

    def _finish(self, cu, msg, status: int, made: int):
        st = cu.state
        if status != m.RUNNING:
            for r in st.get("refs") or []:
                if r is not None:
                    free(cu, r)
            st.clear()
        cu.send(m.ACK, msg.src, tag=msg.tag, arg=status, nbytes=made)

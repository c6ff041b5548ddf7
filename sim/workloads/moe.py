"""moe: Mixture-of-Experts token routing with shared activation references.

Units: a scheduler CU, ``producers`` token-producing CUs (the gate) and expert-host CUs
(expert ``e`` runs on host ``e mod hosts``). Each step the scheduler starts every
producer and every expert and waits for all of them. A producer allocates one buffer
per token (the token's activation, ``hidden x dtype`` bytes) on an MU by the
placement, writes it, and shares the reference with the token's ``top_k`` experts
(under the configured reclamation protocol), then drops its own. An expert learns how
many tokens it gets this step (the gate's decision), allocates an input buffer of that
size at run time, and for every reference it receives reads the activation, appends
it to its input buffer and drops the reference; with all its tokens gathered it
computes its FFN (``4 x hidden x expert_ffn`` FLOP per token: two matrix products,
spread over ``expert_cus`` CUs of which only the host is simulated: they share the time,
and the energy counts all of them) and frees its
input buffer. A token's activation is freed by the protocol once its
producer and all ``top_k`` experts have dropped it.

Routing: expert popularity follows a Zipf law with exponent ``skew`` (0 = uniform);
a token's ``top_k`` distinct experts are drawn by the Gumbel-top-k trick (Kool et al.,
ICML 2019) from counter-based random numbers of (seed, step, token), a pure function.
Or a routing trace (``trace``, routing_trace.py) gives every step's tokens and experts;
its steps may hold different numbers of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import numpy as np

from mapping.placement import MuRoom
from sim import rng
from sim.chip import messages as m
from sim.chip.records import buffer_label
from sim.chip.references import allocate, allocate_many, drop, free, received, share
from sim.chip.spec import CU
from sim.chip.units import Compute, Replies
from sim.keys import Field, Issue, Table
from sim.memory.policies import largest_buffer
from sim.serving.trace import TraceError
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.base import STREAM_ROUTE, Floorplan, tile_field, tile_id, tile_of
from sim.workloads.capabilities import Capabilities
from sim.workloads.routing_trace import ExpertOutOfRange, RoutingTrace, imbalance_of, read_routing, select, skew_of

ACTIVATION = buffer_label(2, "activation")
EXPERT_INPUT = buffer_label(3, "expert-input")
_STEP = 1 << 16  # a REFERENCE's tag is step * _STEP + expert


@WORKLOADS.register("moe")
@dataclass(frozen=True)
class MoeParams(Workload):
    kind: str = "moe"
    steps: int = 4
    tokens: int = 64  # per step
    experts: int = 8
    top_k: int = 2
    skew: float = 0.0
    hidden: int = 1024
    expert_ffn: int = 2048
    dtype_bytes: int = 2
    producers: int = 8
    expert_cus: int = 1  # CUs an expert's FFN is spread over (only the host is simulated)
    scheduler_tile: int = 0
    trace: RoutingTrace | None = None  # replayed routes instead of the Zipf draw

    SECTION: ClassVar[str] = "moe"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
    WORK_UNIT: ClassVar[str] = "steps"
    token_unit: ClassVar[str] = "routed tokens"  # a step's tokens, each once whatever its top_k
    KEYS: ClassVar[Table]

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "MoeParams":
        spec, lay = chip.on_chip()
        sched = tile_of(d["scheduler_tile"], "workload.moe.scheduler_tile", spec, lay, CU, issues)
        n_cu = len(lay.cus)
        if d["top_k"] > d["experts"]:
            issues.append(Issue("workload.moe.top_k", f"{d['top_k']} is more than the {d['experts']} experts"))
        if d["producers"] > n_cu - 2:
            issues.append(Issue("workload.moe.producers", f"{d['producers']} leaves no CU for the experts "
                                f"({n_cu} CUs, one is the scheduler)"))
        trace = _trace_of(d, issues)
        if trace is not None and chip.room is not None:
            issues += _oversize(trace, d["hidden"] * d["dtype_bytes"], chip.room, chip.room_for)
        steps, tokens = d["steps"], d["tokens"]
        if trace is not None:
            steps, tokens = trace.steps, max(trace.tokens(k) for k in range(trace.steps))
        elif not d["trace"]:
            issues += [Issue(f"workload.moe.{k}", "must be at least 1 (0 means all of a trace)")
                       for k in ("steps", "tokens") if d[k] < 1]
        return cls(steps=steps, tokens=tokens, experts=d["experts"], top_k=d["top_k"], skew=d["skew"],
                   hidden=d["hidden"], expert_ffn=d["expert_ffn"], dtype_bytes=d["dtype_bytes"],
                   producers=d["producers"], expert_cus=d["expert_cus"], scheduler_tile=tile_id(sched, spec),
                   trace=trace)

    @property
    def work_items(self) -> int:
        return self.steps

    def program(self, cfg) -> "Moe":
        return Moe(self, cfg)

    @property
    def act_bytes(self) -> int:
        return self.hidden * self.dtype_bytes

    def routes(self, seed: int, step: int) -> np.ndarray:
        """[tokens, top_k] experts of the tokens of ``step``."""
        if self.trace is not None:
            return self.trace.step(step)
        return route(seed, step, self.tokens, self.experts, self.top_k, self.skew)

    def input_figures(self, cfg) -> dict:
        """Expert popularity measured on the routes the run replayed or drew."""
        per_step = [np.bincount(self.routes(cfg.seed, k).ravel(), minlength=self.experts) for k in range(self.steps)]
        return {"moe_skew_measured": skew_of(np.sum(per_step, axis=0)), "moe_load_imbalance": imbalance_of(per_step)}


def _trace_of(d: dict, issues: list[Issue]) -> RoutingTrace | None:
    """The routes of ``workload.moe.trace``, checked against top_k and experts (read_routing checks the ids)."""
    if not d["trace"]:
        return None
    try:
        trace = select(read_routing(d["trace"], d["experts"]), d["trace_layers"], d["steps"], d["tokens"])
    except ExpertOutOfRange as exc:
        issues.append(Issue("workload.moe.experts", f"is {d['experts']}; {exc}"))
        return None
    except TraceError as exc:
        issues.append(Issue("workload.moe.trace", str(exc)))
        return None
    if trace.top_k != d["top_k"]:
        issues.append(Issue("workload.moe.top_k", f"is {d['top_k']}; the trace routes every token to "
                            f"{trace.top_k} experts"))
    return trace


def _oversize(trace: RoutingTrace, act_bytes: int, room: MuRoom, room_for: Callable[[int], str] | None) -> list[Issue]:
    """The first replayed step sending an expert more tokens than its input buffer can hold on
    any MU (known before the run: the run would refuse that buffer), with the changes that make
    it fit: the most tokens a step can replay, and the least MU that holds the buffer."""
    largest = largest_buffer(room)
    for k in range(trace.steps):
        counts = np.bincount(trace.step(k).ravel())
        e = int(counts.argmax()) if counts.size else 0
        if counts.size and counts[e] * act_bytes > largest:
            need = int(counts[e]) * act_bytes
            fixes = []
            tokens = _tokens_fitting(trace, largest // act_bytes)
            if tokens:
                fixes.append(f"replay at most {tokens} tokens a step (--set workload.moe.tokens={tokens})")
            grow = room_for(need) if room_for is not None else ""
            if grow:
                fixes.append(f"give every MU room for it ({grow})")
            return [Issue("workload.moe.trace", f"replayed step {k} routes {counts[e]} tokens to expert {e}: its "
                          f"input buffer of {need:,} B is larger than an MU can hold ({largest:,} B: the least of "
                          f"the MU's {room.capacity:,} B and the memory policy's largest buffer, "
                          f"{room.biggest:,} B); " + (" or ".join(fixes) if fixes else "no MU size or token count "
                                                      "makes it fit"))]
    return []


def _tokens_fitting(trace: RoutingTrace, per_expert: int) -> int:
    """The most tokens of each replayed step (its first ones, as workload.moe.tokens keeps) that
    send no expert more than ``per_expert`` (0: not even one token fits)."""
    most = max(trace.tokens(k) for k in range(trace.steps))
    for k in range(trace.steps):
        routes = trace.step(k)
        for e in np.unique(routes):
            rows = np.flatnonzero((routes == e).any(axis=1))  # tokens routed to e, in order
            if len(rows) > per_expert:
                most = min(most, int(rows[per_expert]))  # the (per_expert + 1)-th of them is one too many
    return most


def _keys(d: MoeParams) -> Table:
    def i(doc, default, unit=""):
        return Field("int", default, doc, min=1, unit=unit)

    return Table({
        "steps": Field("int", d.steps, "routing steps (with a trace: at most this many; 0: all)", min=0),
        "tokens": Field("int", d.tokens, "tokens per step (with a trace: its first this many; 0: all)", min=0),
        "experts": i("experts E", d.experts),
        "top_k": i("experts per token", d.top_k),
        "skew": Field("float", d.skew, "Zipf exponent of expert popularity (0: uniform)", min=0.0),
        "hidden": i("hidden size", d.hidden),
        "expert_ffn": i("expert FFN width", d.expert_ffn),
        "dtype_bytes": i("bytes per element", d.dtype_bytes, "bytes"),
        "producers": i("token-producing CUs (the gate)", d.producers),
        "expert_cus": i("CUs each expert's FFN is spread over (divides its compute time)", d.expert_cus),
        "scheduler_tile": tile_field([0, 0], "[row, col] of the scheduler CU"),
        "trace": Field("str", "", "expert-routing trace replacing the Zipf draw: .npz or Parquet of token -> "
                       "experts per layer and step, or STeP's published NNN_LLL.npz files or their folder "
                       "(docs/traces.md)", file=True),
        "trace_layers": Field("list", [], "trace: layers replayed, each step's in order (empty: all)",
                              item=Field("int", min=0)),
    }, doc="moe")


MoeParams.KEYS = _keys(MoeParams())


def route(seed: int, step: int, tokens: int, experts: int, top_k: int, skew: float) -> np.ndarray:
    """[tokens, top_k] experts of each token of ``step`` (distinct within a token)."""
    ids = step * tokens + np.arange(tokens)
    u = rng.uniform(seed, STREAM_ROUTE, ids[:, None], np.arange(experts)[None, :])
    u = np.clip(u, 1e-300, 1.0 - 1e-16)
    logw = -skew * np.log(np.arange(1, experts + 1, dtype=np.float64))
    keys = logw[None, :] - np.log(-np.log(u))
    return np.argsort(-keys, axis=1, kind="stable")[:, :top_k]


class Moe:
    def __init__(self, p: MoeParams, cfg):
        self.p = p
        self.cfg = cfg
        self.grid = Floorplan(cfg)
        self.scheduler = self.grid.unit_at(*divmod(p.scheduler_tile, cfg.spec.cols))
        cus = [int(c) for c in self.grid.cus if c != self.scheduler]
        self.producers = cus[: p.producers]
        rest = cus[p.producers:]
        self.hosts = rest[: min(p.experts, len(rest))]
        self.flops = cfg.spec.cu_flops_per_cycle
        self._routes: dict[int, np.ndarray] = {}

    def host(self, e: int) -> int:
        return self.hosts[e % len(self.hosts)]

    def routes(self, step: int) -> np.ndarray:
        if step not in self._routes:
            self._routes[step] = self.p.routes(self.cfg.seed, step)
        return self._routes[step]

    def tokens(self, step: int) -> int:
        return self.p.trace.tokens(step) if self.p.trace is not None else self.p.tokens

    def token_id(self, step: int, t: int) -> int:
        """A number unique to the token over the run (places its activation)."""
        return int(self.p.trace.offsets[step]) + t if self.p.trace is not None else step * self.p.tokens + t

    def count(self, step: int, e: int) -> int:
        return int(np.count_nonzero(self.routes(step) == e))

    # ------------------------------------------------------------------ entry points
    def start(self, cu):
        return self._schedule(cu) if cu.uid == self.scheduler else None

    def on_message(self, cu, msg):
        if msg.kind == m.CONTROL and msg.arg == m.CTRL_STEP:
            return self._produce(cu, msg)
        if msg.kind == m.CONTROL and msg.arg == m.CTRL_EXPERT:
            return self._expert(cu, msg)
        if msg.kind == m.REFERENCE:
            return self._gather(cu, msg)
        raise RuntimeError(f"moe CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")

    # ------------------------------------------------------------------ scheduler
    def _schedule(self, cu):
        shard = cu.shard
        for step in range(self.p.steps):
            t0 = shard.now
            shard.counts["admitted"] += 1
            tags = [cu.request(m.CONTROL, u, arg=m.CTRL_STEP, buf=step, nbytes=i) for i, u in enumerate(self.producers)]
            tags += [cu.request(m.CONTROL, self.host(e), arg=m.CTRL_EXPERT, buf=step, nbytes=e)
                     for e in range(self.p.experts)]
            got = yield Replies(tags, "control")
            ok = all(r.arg == m.FINISHED for r in got.values())
            shard.counts["finished"] += 1
            shard.record("request", step, t0, shard.now, self.tokens(step), "ok" if ok else "failed")

    # ------------------------------------------------------------------ producer (gate)
    def _produce(self, cu, msg):
        p = self.p
        step, idx = msg.buf, msg.nbytes
        mine = [t for t in range(self.tokens(step)) if t % len(self.producers) == idx]
        experts = self.routes(step)
        want = [(self.grid.place(cu.uid, idx, j, len(mine), self.token_id(step, t)), p.act_bytes, ACTIVATION)
                for j, t in enumerate(mine)]
        refs = yield from allocate_many(cu, want)
        ok = [(t, r) for t, r in zip(mine, refs) if r is not None]
        for t, r in zip(mine, refs):
            if r is None:  # out of memory: tell the experts the token will not come
                for e in experts[t].tolist():
                    cu.send(m.REFERENCE, self.host(e), tag=step * _STEP + e, status=m.STATUS_FAILED)
        for _, r in ok:
            cu.send(m.WRITE, r.mu, nbytes=p.act_bytes, arg=0, mu=r.mu, buf=r.buf, alloc=r.alloc)
        receivers = [[self.host(e) for e in experts[t].tolist()] for t, _ in ok]
        tags = [[step * _STEP + e for e in experts[t].tolist()] for t, _ in ok]
        yield from share(cu, [r for _, r in ok], receivers, self.cfg.reclaim, tags)
        for _, r in ok:
            drop(cu, r, self.cfg.reclaim)
        status = m.FINISHED if len(ok) == len(mine) else m.FAILED
        cu.send(m.ACK, msg.src, tag=msg.tag, arg=status)

    # ------------------------------------------------------------------ experts
    def _state(self, cu, step: int, e: int) -> dict:
        key = (step, e)
        st = cu.state.get(key)
        if st is None:
            st = cu.state[key] = dict(n=self.count(step, e), gathered=0, pending=0, inref=None, request=None,
                                      ready=False, failed=False)
        return st

    def _expert(self, cu, msg):
        step, e = msg.buf, msg.nbytes
        st = self._state(cu, step, e)
        st["request"] = msg
        if st["n"] == 0:
            yield from self._finish(cu, step, e)
            return
        mu = self.grid.place(cu.uid, e, 0, 1, step * self.p.experts + e)
        ref = yield from allocate(cu, mu, st["n"] * self.p.act_bytes, EXPERT_INPUT)
        if ref is None:
            st["failed"] = True
        st["inref"] = ref
        st["ready"] = True  # its input buffer exists (or could not be had)
        for _ in range(st["pending"]):
            self._append(cu, ref)
        st["pending"] = 0
        if st["gathered"] == st["n"]:
            yield from self._finish(cu, step, e)

    def _gather(self, cu, msg):
        step, e = divmod(msg.tag, _STEP)
        st = self._state(cu, step, e)
        if msg.status == m.STATUS_OK:
            ref = received(cu, msg)
            tag = cu.request(m.READ_REQ, ref.mu, nbytes=self.p.act_bytes, mu=ref.mu, buf=ref.buf, alloc=ref.alloc)
            got = yield Replies([tag], "memory")
            drop(cu, ref, self.cfg.reclaim)
            if got[tag].status != m.STATUS_OK:
                st["failed"] = True
            elif st["ready"]:
                self._append(cu, st["inref"])
            else:
                st["pending"] += 1
        else:
            st["failed"] = True
        st["gathered"] += 1
        if st["gathered"] == st["n"] and st["ready"]:
            yield from self._finish(cu, step, e)

    def _append(self, cu, ref) -> None:
        if ref is not None:
            cu.send(m.APPEND, ref.mu, nbytes=self.p.act_bytes, mu=ref.mu, buf=ref.buf, alloc=ref.alloc)

    def _finish(self, cu, step: int, e: int):
        st = cu.state.pop((step, e))
        n = st["n"]
        if n:
            flops = n * 4 * self.p.hidden * self.p.expert_ffn
            # the host holds its pipeline for its share; the energy counts every CU's share
            cus = self.p.expert_cus
            yield Compute(-(-flops // (self.flops * cus)), cus=cus)
        if st["inref"] is not None:
            free(cu, st["inref"])
        req = st["request"]
        cu.send(m.ACK, req.src, tag=req.tag, arg=m.FAILED if st["failed"] else m.FINISHED)

"""What the chips of a system run: a collective on its own (to measure it), and a mapped plan's
pipeline with box chips (each stage's time from DFModel's partitions; activations sent
stage to stage as messages, so the pipeline's bubble emerges instead of being assumed).

Both register in sim/workloads' ``WORKLOADS`` (``workload.kind``) as system workloads (``Capabilities(system=True)``):
they need a [system], and their ``system_program(cfg)`` gives what every chip runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from mapping.plan import MappingPlan
from mapping.systems import LinkKind, Parallelism, System
from mapping.topology import SystemGraph
from sim.keys import Field, Issue, Table
from sim.system.algorithms import ALGORITHMS, AUTO, NAMES, REDUCING, PortTiming
from sim.system.collectives import COLLECTIVES
from sim.system.shard import BoxChip, Compute, Recv
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.capabilities import Capabilities

OPS = tuple(COLLECTIVES) + ("point_to_point",)
DP_TAG = 1 << 20  # the gradient all-reduce's tag (micro-batches' messages are tagged by their index)


@WORKLOADS.register("collective")
@dataclass(frozen=True)
class CollectiveParams(Workload):
    """Every group along one network dimension runs one collective, ``repeats`` times."""

    kind: str = "collective"
    op: str = "all_reduce"
    dim: int = 0
    nbytes: int = 1 << 20
    repeats: int = 1
    algorithm: str = AUTO  # sim/system/algorithms.py; auto: the least closed-form time for nbytes

    SECTION: ClassVar[str] = "collective"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=True, maps_graph=False)
    token_unit: ClassVar[str] = "collectives"  # a system run reports no tokens: the unit they would be in
    KEYS: ClassVar[Table] = Table({
        "op": Field("choice", "all_reduce", "collective", choices=OPS),
        "dim": Field("int", 0, "network dimension whose groups run it (0 = the first [[system.network]])", min=0),
        "nbytes": Field("size", 1 << 20, "bytes of the collective (point_to_point: of the message)", min=1),
        "repeats": Field("int", 1, "times in a row", min=1),
        "algorithm": Field("choice", AUTO, "all-reduce, all-gather, reduce-scatter algorithm (auto: the one of least "
                           "alpha-beta time for the size, as collective libraries choose)", choices=(AUTO,) + NAMES),
    }, doc="a collective on its own")

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "CollectiveParams":
        system, name = chip.system, d["algorithm"]
        if system is not None and name != AUTO and d["op"] in REDUCING and d["dim"] < len(system.network):
            dim = system.network[d["dim"]]
            if not ALGORITHMS[name].applies(d["op"], dim.kind, dim.size):
                issues.append(Issue("workload.collective.algorithm", f"{name!r} does not run {d['op']} over "
                                    f"{dim.size} chips of a {dim.kind.name.lower()} dimension"))
        return cls(kind, d["op"], d["dim"], d["nbytes"], d["repeats"], name)

    @property
    def work_items(self) -> int:
        return self.repeats

    def system_program(self, cfg) -> "CollectiveProgram":
        return CollectiveProgram(self, cfg)

    def port(self, cfg) -> PortTiming:
        dim = cfg.system.network[self.dim]
        return PortTiming.of(dim.kind, dim.link_bandwidth, dim.link_latency, cfg.clock_hz, cfg.packet_bytes)

    def algorithm_for(self, port: PortTiming, p: int) -> str:
        """The algorithm this run's collective takes (none for all-to-all and point-to-point)."""
        if self.op not in REDUCING:
            return ""
        name = port.choose(self.op, p, self.nbytes) if self.algorithm == AUTO else self.algorithm
        if not ALGORITHMS[name].applies(self.op, port.kind, p):
            raise ValueError(f"collective.algorithm {name!r} does not run {self.op} over {p} chips of a "
                             f"{port.kind.name.lower()} dimension")
        return name

    def system_figures(self, records: list, cfg) -> dict:
        """Each repetition's time (first start to last end over the chips) beside the closed form."""
        times = span_cycles(records)
        port, p = self.port(cfg), cfg.graph.sizes[self.dim]
        algorithm = self.algorithm_for(port, p)
        return {"collective": self.op, "group_chips": p, "collective_cycles": times, "algorithm": algorithm,
                "collective_seconds": [t / cfg.clock_hz for t in times],
                "closed_form_cycles": closed_form(self.op, port, p, self.nbytes, algorithm)}


def span_cycles(records: list) -> list[int]:
    """Cycles from the first chip's start to the last chip's end of each step (by ``ident``, in order)."""
    spans: dict[int, tuple[int, int]] = {}
    for r in records:
        a, b = spans.get(r.ident, (r.start, r.end))
        spans[r.ident] = (min(a, r.start), max(b, r.end))
    return [b - a for _, (a, b) in sorted(spans.items())]


def closed_form(op: str, port: PortTiming, p: int, nbytes: int, algorithm: str) -> int:
    """Cycles of a collective on idle links: the algorithm's alpha-beta time (sim/system/algorithms.py);
    a point-to-point message and a direct all-to-all as sim/system/collectives.py sends them."""
    if p < 2:
        return 0
    alpha = port.alpha(op, p, nbytes)
    if op == "point_to_point":
        return port.ser(nbytes) + alpha
    if op == "all_to_all":
        return (p - 1) * port.ser(-(-nbytes // p)) + alpha
    return port.cycles(op, algorithm, p, nbytes)


class CollectiveProgram:
    def __init__(self, p: CollectiveParams, cfg):
        self.p = p
        self.graph: SystemGraph = cfg.graph
        self.algorithm = p.algorithm_for(p.port(cfg), self.graph.sizes[p.dim])

    def start(self, chip: BoxChip):
        return self._run(chip)

    def _run(self, chip: BoxChip):
        p, shard = self.p, chip.shard
        group = self.graph.group(chip.cid, p.dim)
        kind = self.graph.kinds[p.dim]
        for r in range(p.repeats):
            t0 = shard.now
            if chip.cid == group[0]:
                shard.counts["created"] += 1
            if p.op == "point_to_point":  # the first chip of each group to the next
                if chip.cid == group[0] and len(group) > 1:
                    chip.send(group[1], p.nbytes, r)
                elif len(group) > 1 and chip.cid == group[1]:
                    yield Recv([(group[0], r)])
            else:
                yield from COLLECTIVES[p.op](chip, group, p.nbytes, r, kind, self.algorithm)
            shard.record(p.op, chip.cid, r, t0, shard.now, p.nbytes)
            if chip.cid == group[0]:
                shard.counts["finished"] += 1


@WORKLOADS.register("pipeline")
@dataclass(frozen=True)
class PipelineParams(Workload):
    """A mapped plan over the system with box chips: each chip computes its stage of every
    micro-batch for DFModel's per-micro-batch stage time (TP collectives inside it, as
    DFModel charges them) and sends its share of the activations to the next stage. A
    training plan with DP then all-reduces its stage's gradients over its DP group as ring
    messages; DFModel's amortised share of that all-reduce is taken out of the stage time."""

    kind: str = "pipeline"
    tp: int = 1
    pp: int = 1
    dp: int = 1
    micro_batches: int = 1
    stage_seconds: float = 0.0  # per micro-batch: sum of partition times x layers per stage x micro-batch
    activation_bytes: int = 0  # a chip's share of what crosses a stage boundary per micro-batch
    seconds_per_batch: float = 0.0  # DFModel's
    p2p_seconds: float = 0.0  # DFModel's point-to-point term of it
    pipeline_factor: float = 1.0
    plan_name: str = ""
    dp_bytes: int = 0  # a chip's gradient bytes all-reduced over its DP group once per batch
    dp_seconds_analytic: float = 0.0  # DFModel's share of that per batch, amortised in its stage times

    SECTION: ClassVar[str] = "pipeline"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=True, maps_graph=True)  # else a plan file
    token_unit: ClassVar[str] = "batches"  # a system run reports no tokens: the unit they would be in
    KEYS: ClassVar[Table] = Table({
        "plan": Field("str", "", "plan.json written by `rdasim map --out DIR` for this system "
                      "(else the graph keys are mapped onto the [system] here)"),
        "micro_batches": Field("int", 0, "micro-batches to run (0: the plan's, a whole batch)", min=0),
    }, doc="a mapped plan's pipeline over the system, box chips")

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "PipelineParams":
        system = chip.system
        try:
            plan = resolve_system_plan(d, system)
        except (ValueError, KeyError, OSError) as exc:
            issues.append(Issue("workload.pipeline", str(exc)))
            return cls()
        if not plan.feasible:
            issues.append(Issue("workload.pipeline", f"the plan is {plan.status}: {plan.reason}"))
            return cls()
        return cls.from_plan(plan, d.get("micro_batches") or 0, system)

    @classmethod
    def from_plan(cls, plan: MappingPlan, micro_batches: int = 0, system: System | None = None) -> "PipelineParams":
        """``system``: simulate the DP gradient all-reduce on it (without: DP stays inside the stage time)."""
        dp_share, dp_bytes = dp_gradients(plan, system)
        seconds = 0.0
        for part in plan.partitions:
            share = sum(dp_share.get(k, 0.0) for k in part.kernels)
            if share:  # the partition's time without DFModel's amortised all-reduce, as DFModel sums its terms
                terms = (part.compute_seconds, part.memory_seconds, part.network_seconds)
                overlapped = math.isclose(part.seconds, max(terms), rel_tol=1e-9)
                rest = (part.compute_seconds, part.memory_seconds, max(0.0, part.network_seconds - share))
                seconds += max(rest) if overlapped else sum(rest)
            else:
                seconds += part.seconds
        scale = plan.layers_per_stage * plan.micro_batch
        mbs = micro_batches or plan.num_micro_batches
        return cls("pipeline", plan.tp, plan.pp, plan.dp, mbs, seconds * scale,
                   stage_boundary_bytes(plan), plan.seconds_per_batch, plan.p2p_seconds, plan.pipeline_factor,
                   plan.workload, dp_bytes, float(sum(dp_share.values())) * scale * plan.num_micro_batches)

    @property
    def work_items(self) -> int:
        return 1

    def system_program(self, cfg) -> "PipelineProgram":
        return PipelineProgram(self, cfg)

    def system_figures(self, records: list, cfg) -> dict:
        """Simulated seconds per batch (the micro-batches run, scaled to the plan's batch)
        beside DFModel's, and the pipeline's bubble as it emerged."""
        if not records:
            return {}
        end = max(r.end for r in records)
        start = min(r.start for r in records)
        dp = [r for r in records if r.kind == "dp_all_reduce"]  # the gradients' all-reduce, once per batch
        stage = PipelineProgram(self, cfg).stage_cycles
        sim = (end - start) / cfg.clock_hz
        pipe = (max(r.end for r in records if r.kind == "stage") - start) / cfg.clock_hz  # before the DP all-reduce
        ideal = self.micro_batches * stage / cfg.clock_hz  # no bubble, no transfers
        planned = self.seconds_per_batch
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp, "micro_batches": self.micro_batches,
                "stage_seconds": stage / cfg.clock_hz, "seconds_simulated": sim,
                "bubble_fraction": 1.0 - ideal / pipe if pipe > 0 else 0.0,
                "pipeline_factor_simulated": pipe / ideal if ideal > 0 else 1.0,
                "pipeline_factor_analytic": self.pipeline_factor,
                "seconds_per_batch_analytic": planned, "p2p_seconds_analytic": self.p2p_seconds,
                "dp_all_reduce_seconds": ((max(r.end for r in dp) - min(r.start for r in dp)) / cfg.clock_hz
                                          if dp else 0.0),
                "dp_seconds_analytic": self.dp_seconds_analytic}


def dp_gradients(plan: MappingPlan, system: System | None) -> tuple[dict[str, float], int]:
    """DFModel's per-micro-batch share of each kernel's DP gradient all-reduce (seconds, as
    mapping/kernel_costs.py charges it: the kernel's slice m x n over the micro-batches) and a
    chip's gradient bytes per batch (its stage's layers). Empty without DP or a DP dimension."""
    from mapping import collectives as coll
    from mapping.graph import CollectiveKind

    dims = [d for d in system.network if d.parallelism is Parallelism.DP] if system is not None else []
    if plan.dp < 2 or len(dims) != 1:  # DP over several dimensions stays inside DFModel's stage time
        return {}, 0
    kind = LinkKind.FULLY_CONNECTED if all(d.kind is LinkKind.FULLY_CONNECTED for d in dims) else LinkKind.RING
    spb = coll.seconds_per_byte(CollectiveKind.DP_ALL_REDUCE, kind, plan.dp, min(d.link_bandwidth for d in dims))
    grads = {k.name: k.m * k.n * plan.word for k in plan.kernels if "dp_all_reduce" in k.collectives.split(",")}
    share = {name: g / max(1, plan.num_micro_batches) * spb for name, g in grads.items()}
    return share, int(sum(grads.values()) * plan.layers_per_stage)


def stage_boundary_bytes(plan: MappingPlan) -> int:
    """A chip's share of the activations one micro-batch takes across a stage boundary: the
    graph's last forward kernel's output (and, for training, the gradient coming back)."""
    if plan.pp < 2 or not plan.graph:
        return 0
    fwd = [k for k in plan.graph["kernels"] if k.get("phase", "fwd") == "fwd"]
    if not fwd:
        return 0
    last = fwd[-1]
    per_sample = last["outer"] * last["m"] * last["n"] * plan.word
    both_ways = 2 if any(k.get("phase") == "bwd" for k in plan.graph["kernels"]) else 1
    return int(per_sample * plan.micro_batch * both_ways // max(1, plan.tp))


def resolve_system_plan(d: dict, system) -> MappingPlan:
    """The plan: from a plan file, or mapped here from the graph keys onto ``system``."""
    from mapping.specs import map_graph_keys, read_plan_file

    if d.get("plan"):
        plan, _ = read_plan_file(d["plan"])
        if plan.chips != system.chips or plan.chip != system.chip.name:
            raise ValueError(f"the plan maps onto {plan.chips} x {plan.chip}; this system is "
                             f"{system.chips} x {system.chip.name}")
        return plan
    return map_graph_keys("pipeline", d.get("graph") or {}, d.get("mapping") or {}, system)


class PipelineProgram:
    """Stage ``s`` (the chip's coordinate along the PP dimension) takes micro-batch ``m`` once
    stage ``s - 1`` has sent it and it has finished ``m - 1`` (GPipe's fill and drain)."""

    def __init__(self, p: PipelineParams, cfg):
        self.p = p
        self.cfg = cfg
        graph: SystemGraph = cfg.graph
        system = cfg.system
        self.pp_dim = next((i for i, d in enumerate(system.network) if d.parallelism is Parallelism.PP), -1)
        self.dp_dim = next((i for i, d in enumerate(system.network) if d.parallelism is Parallelism.DP), -1)
        if p.pp > 1 and self.pp_dim < 0:
            raise ValueError("the plan has pipeline stages but no network dimension carries PP")
        self.graph = graph
        # seconds to cycles rounds up, but not for a product's last-bit error (1e-4 s * 1.25e9 Hz)
        self.stage_cycles = max(1, math.ceil(p.stage_seconds * cfg.clock_hz * (1 - 1e-12)))
        self.act_bytes = p.activation_bytes

    def start(self, chip: BoxChip):
        return self._run(chip)

    def _run(self, chip: BoxChip):
        shard, p = chip.shard, self.p
        d = self.pp_dim
        stage = self.graph.coords(chip.cid)[d] if d >= 0 else 0
        group = self.graph.group(chip.cid, d) if d >= 0 else [chip.cid]
        prev = group[stage - 1] if stage > 0 else -1
        nxt = group[stage + 1] if stage + 1 < len(group) else -1
        first = shard.now
        if chip.cid == 0:
            shard.counts["created"] += 1
        for m in range(p.micro_batches):
            if prev >= 0:
                yield Recv([(prev, m)])
            yield Compute(self.stage_cycles)
            if nxt >= 0:
                chip.send(nxt, self.act_bytes, m)
        shard.record("stage", chip.cid, stage, first, shard.now, p.micro_batches)
        if p.dp_bytes and self.dp_dim >= 0:  # the batch's gradients, over this chip's DP group
            start = shard.now
            group = self.graph.group(chip.cid, self.dp_dim)
            yield from COLLECTIVES["all_reduce"](chip, group, p.dp_bytes, DP_TAG, self.graph.kinds[self.dp_dim])
            shard.record("dp_all_reduce", chip.cid, stage, start, shard.now, p.dp_bytes)
        if chip.cid == 0:
            shard.counts["finished"] += 1


__all__ = ["CollectiveParams", "LinkKind", "PipelineParams"]

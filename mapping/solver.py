"""The mapper: inter-chip tensor splits, then for every parallelism candidate the partition
problem (exact evaluation, heuristic incumbent, MILP), pruned by bounds and dominance.

End-to-end time per batch (DFModel): ``multiplier * sum_c T_c + p2p`` with the
multiplier from mapping.parallelism. The answer's lower bound is the smallest proven
bound over all candidates that were not beaten by bound or dominance.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from mapping.cost import system_cost, system_power
from mapping.graph import buffer_depths, edge_index, kernels, tensors
from mapping.graph import to_dict as graph_to_dict
from mapping.heuristics import heuristic
from mapping.interchip import SplitInfeasible, SplitPlan, choose_splits, no_splits
from mapping.intrachip import solve_partitions
from mapping.kernel_costs import ExecutionModel, KernelSlice, partition_problem
from mapping.parallelism import Candidate, candidates, check_network
from mapping.partition import Evaluation, PartitionProblem, evaluate, time_lower_bound
from mapping.plan import KernelPlan, MappingPlan, PartitionPlan, TensorPlan
from mapping.systems import System
from mapping.workload import Scheme, Workload

_ARRAYS = ("compute", "network", "kernel_memory", "weight_sram", "spill", "onchip_sram", "spill_sram", "edge_dram")


@dataclass(frozen=True)
class MappingProblem:
    """Everything one mapping needs; presets are instances of this."""

    workload: Workload
    system: System
    model: ExecutionModel = field(default_factory=ExecutionModel)
    time_limit: float = 60.0
    gap: float = 1e-3


@dataclass
class _Outcome:
    cand: Candidate
    problem: PartitionProblem
    slices: list[KernelSlice]
    lower: float  # seconds per batch, cheap bound
    bound: float = math.inf  # proven, seconds per batch
    best: Evaluation | None = None
    status: str = "pending"
    reason: str = ""

    def seconds(self, total: float) -> float:
        return self.cand.multiplier * total + self.cand.p2p_seconds

    @property
    def value(self) -> float:
        return self.seconds(self.best.total) if self.best is not None else math.inf


def dominates(a: _Outcome, b: _Outcome) -> bool:
    """True if b can never beat a: b's every cost coefficient is >= a's on the same structure."""
    pa, pb = a.problem, b.problem
    if pa.core_options is not None or pb.core_options is not None or pa.n != pb.n:
        return False
    if (pa.partitions, pa.sram_capacity, pa.dram_capacity, pa.overlap) != \
            (pb.partitions, pb.sram_capacity, pb.dram_capacity, pb.overlap):
        return False
    if b.cand.multiplier < a.cand.multiplier or b.cand.p2p_seconds < a.cand.p2p_seconds:
        return False
    if pb.dram_fixed < pa.dram_fixed:
        return False
    return all(np.all(getattr(pb, k) >= getattr(pa, k) * (1 - 1e-12)) for k in _ARRAYS)


def diagnose(problem: PartitionProblem, time_limit: float = 10.0) -> str:
    """Name the constraint that makes a partition problem infeasible."""
    p = problem
    if p.dram_fixed > p.dram_capacity:
        return (f"DRAM capacity: weights x layers per stage plus resident data need {p.dram_fixed:.4g} B "
                f"per chip, the chip has {p.dram_capacity:.4g} B")
    if not p.stream_weights:
        k = int(np.argmax(p.weight_sram))
        if p.weight_sram[k] > p.sram_capacity:
            return (f"SRAM capacity: the weight slice of kernel {p.names[k]} ({p.weight_sram[k]:.4g} B) fits in "
                    f"no partition ({p.sram_capacity:.4g} B of SRAM)")
    if p.kernel_by_kernel:
        return evaluate(p, np.arange(p.n)).violations[0]
    elastic = solve_partitions(p, time_limit=time_limit, elastic=True)
    if elastic.violated:
        return "cannot satisfy " + "; ".join(elastic.violated)
    return f"no feasible partitioning found ({elastic.status})"


def _solve_candidate(o: _Outcome, budget: float, gap: float) -> None:
    p = o.problem
    if p.kernel_by_kernel:  # the schedule is fixed: evaluate it exactly
        ev = evaluate(p, np.arange(p.n))
        if ev.feasible:
            o.best, o.bound, o.status = ev, o.seconds(ev.total), "optimal"
        else:
            o.status, o.reason = "infeasible", ev.violations[0]
        return
    incumbent = heuristic(p)
    cutoff = incumbent.total if incumbent is not None else None
    res = solve_partitions(p, time_limit=budget, gap=gap, cutoff=cutoff)
    best = incumbent
    if res.assignment is not None:
        ev = evaluate(p, res.assignment)
        if ev.feasible and (best is None or ev.total < best.total):
            best = ev
    if res.status == "infeasible":  # nothing beats the cutoff: the incumbent is optimal
        bound_total = cutoff if cutoff is not None else math.inf
    else:
        bound_total = max(res.bound, time_lower_bound(p)) if math.isfinite(res.bound) else time_lower_bound(p)
    if best is None:
        o.status = "infeasible" if res.status == "infeasible" else "no_solution"
        o.reason = diagnose(p) if res.status == "infeasible" else f"no solution within {budget:.1f} s"
        o.bound = o.seconds(bound_total) if res.status != "infeasible" else math.inf
        return
    o.best = best
    o.bound = min(o.seconds(bound_total), o.seconds(best.total))
    o.status = "optimal" if o.seconds(best.total) - o.bound <= gap * o.seconds(best.total) + 1e-15 else "feasible"


def map_workload(workload: Workload, system: System, model: ExecutionModel | None = None,
                 time_limit: float = 60.0, gap: float = 1e-3,
                 progress: Callable[[str], None] | None = None) -> MappingPlan:
    """The best mapping of ``workload`` on ``system`` with its lower bound and gap."""
    started = time.perf_counter()
    model = model or ExecutionModel()
    say = progress or (lambda _msg: None)
    sizes = "x".join(str(d.size or "?") for d in system.network)
    base: dict[str, Any] = dict(workload=workload.name, system=f"{system.shape} {sizes}", chip=system.chip.name,
                                chips=system.chips, copies=workload.copies, pass_unit=workload.pass_units,
                                units_per_pass=workload.units_per_pass)

    def infeasible(reason: str, **extra) -> MappingPlan:
        return MappingPlan(status="infeasible", reason=reason, solver_seconds=time.perf_counter() - started,
                           **base, **extra)

    problems = check_network(system, workload.scheme)
    if problems:
        return infeasible("; ".join(problems))
    try:
        tp = workload.scheme is Scheme.TENSOR_PARALLEL
        splits = choose_splits(workload.graph) if tp else no_splits(workload.graph)
    except SplitInfeasible as exc:
        return infeasible(f"tensor split: {exc}")
    cands, skipped = candidates(workload, system)
    if not cands:
        return infeasible("; ".join(skipped) or "no parallelism candidate")
    outcomes = []
    for cand in cands:
        problem, slices = partition_problem(workload, system, cand, splits, model)
        lower = cand.multiplier * time_lower_bound(problem) + cand.p2p_seconds
        outcomes.append(_Outcome(cand, problem, slices, lower))
    outcomes.sort(key=lambda o: (o.lower, o.cand.tile_size, o.cand.micro_batch))
    best: _Outcome | None = None
    solved: list[_Outcome] = []
    pruned = 0
    for i, o in enumerate(outcomes):
        if best is not None and o.lower >= best.value:
            pruned += 1
            continue
        if any(dominates(s, o) for s in solved):
            pruned += 1
            continue
        left = time_limit - (time.perf_counter() - started)
        budget = max(0.5, left / max(1, min(4, len(outcomes) - i)))
        say(f"candidate TP={o.cand.tp} PP={o.cand.pp} DP={o.cand.dp} mb={o.cand.micro_batch} "
            f"tile={o.cand.tile_size}: bound {o.lower:.6g} s")
        _solve_candidate(o, budget, gap)
        solved.append(o)
        if o.best is not None and (best is None or o.value < best.value):
            best = o
    seconds = time.perf_counter() - started
    if best is None:
        first = min(solved, key=lambda o: o.lower) if solved else outcomes[0]
        return infeasible(first.reason or first.status, candidates=len(outcomes), pruned=pruned)
    lower = min([best.value] + [o.bound for o in solved])
    return _plan(workload, system, splits, best, lower, seconds, len(outcomes), pruned, gap, base)


def _plan(workload: Workload, system: System, splits: SplitPlan, o: _Outcome, lower: float,
          seconds: float, n_cand: int, pruned: int, gap: float, base: dict) -> MappingPlan:
    p, ev, cand = o.problem, o.best, o.cand
    assert ev is not None, "only solved candidates become plans"
    ks = kernels(workload.graph)
    sized = system.with_sizes(cand.sizes)
    total = o.value
    flop = sum(k.flop for k in ks) * workload.graph_repeats * workload.global_batch
    rel_gap = max(0.0, (total - lower) / total) if total > 0 else 0.0
    kernel_rows = []
    for i, k in enumerate(ks):
        coll = [c.kind.value for c in k.collectives]
        kc = splits.kernel_collective[i]
        if kc is not None:
            coll.insert(0, kc.value)
        alone = p.compute[i] if p.core_options is None else float(p.core_options[i][1].min())
        s = o.slices[i]
        kernel_rows.append(KernelPlan(
            k.name, k.kind.value, k.phase, splits.dims[i].value, int(ev.assignment[i]),
            s.flop(k) * s.tiles, float(alone), float(p.network[i].sum()),
            float(p.weight_sram[i]), bool(ev.streamed[i]), ",".join(coll),
            m=s.m, k=s.k, n=s.n, tiles=s.tiles, flop_per_tile=s.flop(k), extra_dram_bytes=s.extra_dram_bytes(k),
            role=k.role, outer=k.outer))
    word = workload.graph.graph["word"]
    depths = buffer_depths(workload.graph)
    tensor_rows = tuple(
        TensorPlan(u, v, t.operand, float(o.slices[iu].m * o.slices[iu].n * word), depth,
                   bool(ev.assignment[iu] == ev.assignment[iv]))
        for (u, v, t), (iu, iv), depth in zip(tensors(workload.graph), edge_index(workload.graph)[1], depths))
    parts = tuple(
        PartitionPlan(c, tuple(p.names[k] for k in np.flatnonzero(ev.assignment == c)),
                      float(ev.compute[c]), float(ev.memory[c]), float(ev.network[c]), float(ev.time[c]),
                      float(ev.sram[c]))
        for c in range(len(ev.time)) if np.any(ev.assignment == c)
    )
    base = dict(base, system=f"{system.shape} {'x'.join(map(str, cand.sizes))}")
    return MappingPlan(
        **base, status="optimal" if rel_gap <= gap else "feasible",
        tp=cand.tp, pp=cand.pp, dp=cand.dp, micro_batch=cand.micro_batch,
        tile_size=cand.tile_size, num_tiles=cand.num_tiles, layers_per_stage=cand.layers_per_stage,
        num_micro_batches=cand.num_micro_batches, pipeline_factor=cand.pipeline_factor,
        seconds_per_batch=total, lower_bound_seconds=lower, gap=rel_gap,
        utilization=flop / (total * system.chips * system.chip.peak_flops),
        cost=system_cost(sized, workload.copies).total, power=system_power(sized, workload.copies).total,
        p2p_seconds=cand.p2p_seconds, collective_bytes=splits.collective_bytes, dram_bytes=ev.dram_peak,
        solver_seconds=seconds, candidates=n_cand, pruned=pruned,
        kernels=tuple(kernel_rows), partitions=parts, tensors=tensor_rows, word=word,
        graph=graph_to_dict(workload.graph),
    )


def solve(problem: MappingProblem, progress: Callable[[str], None] | None = None) -> MappingPlan:
    return map_workload(problem.workload, problem.system, problem.model, problem.time_limit, problem.gap, progress)

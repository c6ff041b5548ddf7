"""``rdasim map``: a workload mapped onto a system by DFModel's solver (mapping/), recorded as a
result like a simulation's: map_plan, map_kernels and map_partitions, and plan.json (the plan,
its grid placement and weight design) as a side file."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cluster.config import config_hash
from cluster.config.map import to_problem, tp_problem
from cluster.jobs.job import result
from cluster.results.record import Result
from cluster.results.schemas import MAP_KERNELS, MAP_PARTITIONS, MAP_PLAN, RunMeta
from mapping.placement import GridPlacement
from mapping.plan import MappingPlan
from mapping.solver import solve

if TYPE_CHECKING:
    from sim.workloads.dataflow.sharing import WeightDesign


@dataclass(frozen=True)
class OnGrid:
    """A plan on its RDA's grid: the placement `rdasim map` writes (or why it does not fit), and
    the weight design read from it. All None for a plan with no grid of its own."""

    placement: GridPlacement | None = None
    error: str = ""
    design: WeightDesign | None = None


def on_grid(plan: MappingPlan) -> OnGrid:
    """Place a single-chip plan on an RDA grid preset for the default memory policy
    (sim/workloads/dataflow/planning.map_placement) and read its weight design."""
    from mapping.chips import RDA_PRESETS
    from mapping.placement import PlacementError
    from sim.workloads.dataflow.planning import map_placement
    from sim.workloads.dataflow.sharing import weight_design

    try:
        placement = map_placement(plan)
    except PlacementError as exc:
        return OnGrid(error=str(exc))
    if placement is None:
        return OnGrid()
    return OnGrid(placement, "", weight_design(plan, placement, RDA_PRESETS[plan.chip]))


def plan_file(plan: MappingPlan, grid: OnGrid | None = None) -> dict:
    """plan.json: the plan and, for a single-chip plan on an RDA this simulator has, its grid
    placement with every buffer's address (`rdasim run` with workload.kind = "dataflow" runs it)
    and its weight design (the partial-free weight field per split that never borrows).
    Placed for the default memory policy (virtual, 4 KiB blocks); a run with another policy
    places it again."""
    grid = grid or on_grid(plan)
    out: dict = {"plan": plan.to_dict()}
    if grid.placement is not None:
        out["placement"] = grid.placement.to_dict()
    if grid.error:
        out["placement_error"] = grid.error
    if grid.design is not None:
        out["weights"] = grid.design.to_dict()
    return out


def _finite(x: float) -> float:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else float("nan")


def map_result(cfg: dict, plan: MappingPlan, grid: OnGrid) -> Result:
    """The record of a solved mapping: its status is the plan's (optimal, feasible, infeasible),
    or "unusable" for a plan whose tensor parallelism the system cannot hold (config/map.py)."""
    chash = config_hash(cfg)
    meta = RunMeta(run_id=f"map-{chash}", config_hash=chash, seed=0)
    row = {c.name: getattr(plan, c.name) for c in MAP_PLAN.columns}
    row = {k: _finite(v) if isinstance(v, float) else v for k, v in row.items()}
    k, p = plan.kernels, plan.partitions
    tables = {
        "map_plan": MAP_PLAN.build(row, meta),
        "map_kernels": MAP_KERNELS.build({
            "kernel": [x.name for x in k], "kind": [x.kind for x in k], "phase": [x.phase for x in k],
            "split_dim": [x.split_dim for x in k], "partition": [x.partition for x in k], "flop": [x.flop for x in k],
            "compute_seconds": [x.compute_seconds for x in k], "network_seconds": [x.network_seconds for x in k],
            "weight_bytes": [x.weight_bytes for x in k], "streamed": [x.streamed for x in k],
            "collectives": [x.collectives for x in k]}, meta),
        "map_partitions": MAP_PARTITIONS.build({
            "partition": [x.index for x in p], "kernels": [len(x.kernels) for x in p],
            "compute_seconds": [x.compute_seconds for x in p], "memory_seconds": [x.memory_seconds for x in p],
            "network_seconds": [x.network_seconds for x in p], "seconds": [x.seconds for x in p],
            "sram_bytes": [x.sram_bytes for x in p]}, meta),
    }
    unusable = tp_problem(cfg, plan.tp) if plan.feasible else None
    status, detail = ("unusable", unusable) if unusable else (plan.status, plan.reason)
    figures = {**plan.summary(), "weights": grid.design.to_dict() if grid.design else None}
    return result("map", meta, cfg, status, detail or "", figures, tables, {"plan.json": plan_file(plan, grid)})


def map_config(cfg: dict, quiet: bool = False) -> Result:
    """Solve a resolved ``rdasim map`` config (the solver's steps on stderr unless ``quiet``) and record the plan."""
    plan = solve(to_problem(cfg), None if quiet else _say)
    return map_result(cfg, plan, on_grid(plan))


def _say(step: str) -> None:
    print(f"  {step}", file=sys.stderr)

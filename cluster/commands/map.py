"""``rdasim map``: DFModel-style mapping of a workload onto a system (mapping/)."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from allocators.weights import STRATEGIES
from cluster.commands import common
from cluster.commands.common import add_set_argument, report_files, save
from cluster.config import config_hash
from cluster.config.map import resolve, to_problem, tp_problem
from cluster.errors import EXIT_NO_ANSWER, UserError
from cluster.results import layout
from cluster.results.io import write_json, write_parquet
from cluster.results.schemas import MAP_KERNELS, MAP_PARTITIONS, MAP_PLAN, RunMeta
from mapping.placement import GridPlacement
from mapping.plan import MappingPlan
from mapping.solver import solve

if TYPE_CHECKING:
    from sim.workloads.dataflow.sharing import WeightDesign


def add_arguments(parser) -> None:
    parser.add_argument("config", nargs="?", help="mapping config (TOML); optional with --preset")
    parser.add_argument("--preset", help="published preset, e.g. gpt3-1t-sn30 (see docs/mapping.md)")
    add_set_argument(parser)
    parser.add_argument("--time-limit", help="solver budget, e.g. 30s (mapping.time_limit)")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    common.add_run_out_arguments(parser, "map_plan, map_kernels and map_partitions (and plan.json)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def run(args) -> int:
    if not args.config and not args.preset:
        raise UserError("rdasim map: give a CONFIG.toml or --preset NAME")
    extra = [("mapping.time_limit", args.time_limit)] if args.time_limit else []
    cfg = resolve(args.config, args.overrides, args.preset, extra)
    out = common.prepare_out(args)  # before the work
    problem = to_problem(cfg)
    progress = None if args.quiet else (lambda msg: print(f"  {msg}", file=sys.stderr))
    plan = solve(problem, progress)
    grid = on_grid(plan)
    summary = {**plan.summary(), "weights": grid.design.to_dict() if grid.design else None}
    if args.json:
        print(json.dumps(summary))
    else:
        print(summary_table(plan, cfg["mapping"].get("partitions") or 0))
        if grid.design:
            print("\n" + weights_table(grid.design))
    if out is not None:
        report_files(save(lambda: write_results(plan, cfg, out, grid), [summary], printed=args.json))
    if not plan.feasible:
        print(f"infeasible: {plan.reason}", file=sys.stderr)
        return EXIT_NO_ANSWER
    unphysical = tp_problem(cfg, plan.tp)
    if unphysical:
        print(f"not a usable mapping: {unphysical}", file=sys.stderr)
        return EXIT_NO_ANSWER
    return 0


def _ranges(indices: list[int]) -> str:
    from cluster.sweep.outcomes import ranges

    return ranges(indices)


def empty_partitions(plan: MappingPlan, configured: int) -> str | None:
    """Why partitions up to the configured count have no row: the solver left them empty (it may use up to
    mapping.partitions; a training graph keeps its forward partitions before its backward ones)."""
    used = {p.index for p in plan.partitions}
    top = max(configured, max(used, default=-1) + 1)
    empty = [c for c in range(top) if c not in used]
    if not empty:
        return None
    word = "partition" if len(empty) == 1 else "partitions"
    line = (f"{word} {_ranges(empty)} hold{'s' if len(empty) == 1 else ''} no kernel: the optimum leaves "
            f"{'it' if len(empty) == 1 else 'them'} empty (mapping.partitions = {top} is the most it may use")
    phases = {ph: sorted({k.partition for k in plan.kernels if k.phase == ph}) for ph in ("fwd", "bwd")}
    if phases["fwd"] and phases["bwd"]:
        line += (f"; a training graph's forward kernels run before its backward ones: forward in "
                 f"{_ranges(phases['fwd'])}, backward in {_ranges(phases['bwd'])}")
    return line + ")"


def summary_table(plan: MappingPlan, configured: int = 0) -> str:
    rows = [
        ("workload", plan.workload), ("system", f"{plan.chips} x {plan.chip}, {plan.system}"),
        ("status", plan.status + (f" ({plan.reason})" if plan.reason else "")),
    ]
    if plan.feasible:
        rows += [
            ("TP / PP / DP", f"{plan.tp} / {plan.pp} / {plan.dp}"),
            ("micro-batch, tile", f"{plan.micro_batch}, {plan.tile_size} ({plan.num_tiles} tiles)"),
            ("pipeline factor", f"{plan.pipeline_factor:.6f}"),
            ("seconds per batch", f"{plan.seconds_per_batch:.6g}"),
            ("lower bound, gap", f"{plan.lower_bound_seconds:.6g} s, {plan.gap:.3%}"),
            ("utilization", f"{plan.utilization:.4f}"),
            ("cost, power", f"${plan.cost:,.0f}, {plan.power:,.0f} W"),
            ("solver", f"{plan.solver_seconds:.2f} s, {plan.candidates} candidates ({plan.pruned} pruned)"),
        ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    if plan.feasible and plan.partitions:
        lines.append("")
        lines.append(f"{'part':>4} {'kernels':>7} {'compute s':>11} {'memory s':>11} {'network s':>11} "
                     f"{'time s':>11} {'SRAM B':>10}")
        for p in plan.partitions[:40]:
            lines.append(f"{p.index:>4} {len(p.kernels):>7} {p.compute_seconds:>11.4g} {p.memory_seconds:>11.4g} "
                         f"{p.network_seconds:>11.4g} {p.seconds:>11.4g} {p.sram_bytes:>10.4g}")
        if len(plan.partitions) > 40:
            lines.append(f"... {len(plan.partitions) - 40} more partitions")
        note = empty_partitions(plan, configured)
        if note:
            lines.append(note)
    return "\n".join(lines)


def weights_table(design: WeightDesign) -> str:
    """Each buffer's widest sharing and the weight field per split that never borrows (partial-free)."""
    splits = " ".join(f"{s:>6}" for s in STRATEGIES)
    lines = [f"weight design (partial-free): at most {design.shared_references} holders of one reference; "
             "memory.weight_bits that never borrows: "
             + ", ".join(f"{s} {design.min_bits(s)}" for s in STRATEGIES),
             f"{'part':>4} {'buffer':<24} {'kind':<7} {'stripes':>7} {'holders':>7} {splits}"]
    for b in design.buffers[:40]:
        bits = " ".join(f"{b.min_bits[s]:>6}" for s in STRATEGIES)
        part = "all" if b.partition < 0 else b.partition
        lines.append(f"{part:>4} {b.buffer[:24]:<24} {b.kind:<7} {b.stripes:>7} {b.shared_references:>7} {bits}")
    if len(design.buffers) > 40:
        lines.append(f"... {len(design.buffers) - 40} more buffers")
    return "\n".join(lines)


def _finite(x: float) -> float:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else float("nan")


def write_results(plan: MappingPlan, cfg: dict, out: Path | layout.RunOutput, grid: OnGrid | None = None) -> list[Path]:
    meta = RunMeta(run_id=f"map-{config_hash(cfg)}", config_hash=config_hash(cfg), seed=0)
    rid = meta.run_id
    row = {c.name: getattr(plan, c.name) for c in MAP_PLAN.columns}
    row = {k: _finite(v) if isinstance(v, float) else v for k, v in row.items()}
    files = [write_parquet(MAP_PLAN.build(row, meta), layout.table_path(out, "map_plan", rid))]
    k = plan.kernels
    files.append(write_parquet(MAP_KERNELS.build({
        "kernel": [x.name for x in k], "kind": [x.kind for x in k], "phase": [x.phase for x in k],
        "split_dim": [x.split_dim for x in k], "partition": [x.partition for x in k], "flop": [x.flop for x in k],
        "compute_seconds": [x.compute_seconds for x in k], "network_seconds": [x.network_seconds for x in k],
        "weight_bytes": [x.weight_bytes for x in k], "streamed": [x.streamed for x in k],
        "collectives": [x.collectives for x in k]}, meta), layout.table_path(out, "map_kernels", rid)))
    p = plan.partitions
    files.append(write_parquet(MAP_PARTITIONS.build({
        "partition": [x.index for x in p], "kernels": [len(x.kernels) for x in p],
        "compute_seconds": [x.compute_seconds for x in p], "memory_seconds": [x.memory_seconds for x in p],
        "network_seconds": [x.network_seconds for x in p], "seconds": [x.seconds for x in p],
        "sram_bytes": [x.sram_bytes for x in p]}, meta), layout.table_path(out, "map_partitions", rid)))
    files.append(write_json(plan_file(plan, grid), layout.side_path(out, "plan.json", rid)))
    return files


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

"""``rdasim map``: DFModel-style mapping of a workload onto a system (mapping/)."""

from __future__ import annotations

import json
import sys

from allocators.weights import STRATEGIES
from cluster.commands import common
from cluster.commands.common import add_set_argument, flag_values, report_files, save
from cluster.config import short
from cluster.config.map import resolve
from cluster.errors import UserError
from mapping.plan import MappingPlan


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
    cfg = resolve(args.config, args.overrides, args.preset, flag_values(args, short.MAP))
    out = common.prepare_out(args)  # before the work
    from cluster.jobs.plan import map_config  # the solver: imported once the config is good

    result = map_config(cfg, quiet=args.quiet)
    summary = dict(result.summary)
    if args.json:
        print(json.dumps(summary))
    else:
        print(summary_table(MappingPlan.from_dict(result.files["plan.json"]["plan"]),
                            cfg["mapping"].get("partitions") or 0))
        if summary["weights"]:
            print("\n" + weights_table(summary["weights"]))
    if out is not None:
        report_files(save(lambda: result.write(out), [summary], printed=args.json))
    if result.status == "infeasible":
        print(f"infeasible: {result.summary.status_detail}", file=sys.stderr)
    elif result.status == "unusable":
        print(f"not a usable mapping: {result.summary.status_detail}", file=sys.stderr)
    return result.exit_status


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


def weights_table(design: dict) -> str:
    """Each buffer's widest sharing and the weight field per split that never borrows (partial-free),
    from the weight design as the result holds it (sim/workloads/dataflow/sharing.py ``to_dict``)."""
    splits = " ".join(f"{s:>6}" for s in STRATEGIES)
    buffers = design["buffers"]
    lines = [f"weight design (partial-free): at most {design['shared_references']} holders of one reference; "
             "memory.weight_bits that never borrows: "
             + ", ".join(f"{s} {design['min_bits'][s]}" for s in STRATEGIES),
             f"{'part':>4} {'buffer':<24} {'kind':<7} {'stripes':>7} {'holders':>7} {splits}"]
    for b in buffers[:40]:
        bits = " ".join(f"{b['min_bits'][s]:>6}" for s in STRATEGIES)
        part = "all" if b["partition"] < 0 else b["partition"]
        lines.append(f"{part:>4} {b['buffer'][:24]:<24} {b['kind']:<7} {b['stripes']:>7} {b['shared_references']:>7} "
                     f"{bits}")
    if len(buffers) > 40:
        lines.append(f"... {len(buffers) - 40} more buffers")
    return "\n".join(lines)

"""rdasim run: a workload on the CU/MU grid under a memory policy and reclamation protocol."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cluster.commands import common
from cluster.commands.common import add_run_arguments, flag_values, json_safe, report_files, save
from cluster.config import load, short
from cluster.config.run import RUN_SCHEMA
from cluster.errors import UserError
from cluster.parallel.distribution import describe_distribution, distributed
from cluster.results import io, layout
from cluster.results.schemas import ENERGY_COLUMNS, INPUT_COLUMNS, SERVING_COLUMNS, TIER_COLUMNS
from sim.energy.table import COMPONENTS

FLAGS = short.CHIP  # command-line flag -> config key (a flag, --set and a file key all say the same)

JSON_KEYS = (
    "workload", "chip", "network", "policy", "reclaim", "on_oom", "shards", "backend",
    "sim_cycles", "sim_seconds", "wall_seconds", "tokens", "token_unit", "tokens_per_second", "requests",
    "requests_failed",
    "latency_p50_cycles", "latency_p99_cycles", "peak_mu_utilization", "mean_mu_utilization", "peak_mu_reserved",
    "fragmentation", "bytes_copied", "messages", "messages_total", "flits_total", "sync_messages",
    "sync_wait_cycles", "memory_wait_cycles", "oom_events", "stalls", "stall_cycles", "evictions", "oom_failures",
    "use_after_free", "double_free", "premature_free", "leaks", "live_at_end", "completed", "cut_off", "status",
    "status_detail", "epochs", "result_hash",
)
ENERGY_KEYS = tuple(c.name for c in ENERGY_COLUMNS)


# a mapped (dataflow) run adds these
MAPPED_KEYS = ("seconds_per_batch_simulated", "seconds_per_batch_analytic", "seconds_per_pass_simulated",
               "seconds_per_pass_analytic", "partitions")
INPUT_KEYS = tuple(c.name for c in INPUT_COLUMNS)  # a trace's or a routing's measured figures, when there are any
SERVING_KEYS = tuple(c.name for c in SERVING_COLUMNS)  # first-OOM utilisation; a decode run's latencies
TIER_KEYS = tuple(c.name for c in TIER_COLUMNS)  # a chip with memory tiers


def _energy(s: dict) -> None:
    """The energy line of a run that priced it (a chip's, a serving system's)."""
    if s.get("energy_joules") is not None:
        print(f"  energy {s['energy_joules']:.4g} J ({s['energy_per_token_joules']:.4g} J per {one(s['token_unit'])}): "
              + ", ".join(f"{c} {s[f'energy_{c}_joules']:.3g}" for c in COMPONENTS) + f" J [{s['energy_table']}]")


def _serving(s: dict) -> None:
    """The serving lines of a run that served requests (a chip's or a system's)."""
    if s.get("trace_requests") is not None:
        print(f"  trace ({s['trace_format']}): {s['trace_requests']} requests at {s['trace_arrival_rate']:,.4g} "
              f"per simulated s; prompts capped {s['trace_capped_prompts']}, outputs capped "
              f"{s['trace_capped_outputs']}" + (f"; {s['trace_failed_skipped']} failed rows skipped"
                                                if s["trace_failed_skipped"] else "")
              + (f"; {s['trace_note']}" if s.get("trace_note") else ""))
    if s.get("requests_finished") is not None:
        ms = {k: "-" if s[k] is None else f"{s[k] * 1e6:,.1f}" for k in ("ttft_p50_seconds", "ttft_p99_seconds",
                                                                      "tbt_p50_seconds", "tbt_p99_seconds")}
        prompts = f" ({s['prompt_tokens']:,} prompt tokens)" if s.get("prompt_tokens") is not None else ""
        print(f"  serving: {s['requests_finished']} served{prompts}, {s['preemptions']} preemptions; TTFT p50 "
              f"{ms['ttft_p50_seconds']} / p99 {ms['ttft_p99_seconds']} us; TBT p50 {ms['tbt_p50_seconds']} / "
              f"p99 {ms['tbt_p99_seconds']} us"
              + (f"; goodput {s['goodput_requests_per_second']:,.4g} requests/s"
                 if s.get("goodput_requests_per_second") is not None else ""))
    if s.get("prefix_blocks") is not None:
        print(f"  prefix sharing: {s['prefix_hit_blocks']:,} of {s['prefix_blocks']:,} prompt blocks found "
              f"({s['prefix_hit_rate']:.1%}), {s['prefix_hit_bytes']:,} B of KV not written; at most "
              f"{s['kv_bytes_saved']:,} B shared at once")


def _system(args, result, out) -> int:
    """`rdasim run` with a [system]: chips as nodes of the inter-chip network."""
    s = summary = dict(result.summary)
    if args.json:
        print(json.dumps({k: json_safe(v) if not isinstance(v, list) else [json_safe(x) for x in v]
                          for k, v in summary.items()}))
    else:
        print(f"{s['workload']} on {s['chips']} x {s['chip']} ({s['topology']}, {s['fidelity']} chips), "
              f"{s['shards']} shard(s) on {s['backend']}")
        print(f"  simulated {s['sim_seconds']:.6g} s ({s['sim_cycles']:,} cycles) in {s['wall_seconds']:.2f} s; "
              f"{s['messages_total']:,} messages, {s['bytes_total']:,} bytes between chips")
        if "seconds_per_batch_simulated" in s:  # grid chips: the slowest chip's mapped run
            print(f"  seconds per batch: simulated {s['seconds_per_batch_simulated']:.6g} (slowest chip, "
                  f"{s['slowest_chip']}), DFModel {s['seconds_per_batch_analytic']:.6g}")
        elif "seconds_per_batch_analytic" in s:
            print(f"  seconds per batch: simulated {s['seconds_simulated']:.6g}, "
                  f"DFModel {s['seconds_per_batch_analytic']:.6g}; "
                  f"pipeline factor simulated {s['pipeline_factor_simulated']:.6f}, "
                  f"DFModel {s['pipeline_factor_analytic']:.6f}")
        if "closed_form_cycles" in s:
            print(f"  {s['collective']} over {s['group_chips']} chips: {s['collective_cycles'][0]:,} cycles "
                  f"(closed form {s['closed_form_cycles']:,})")
        if "expert_imbalance" in s:
            print(f"  expert steps: mean {s['step_seconds_mean']:.6g} s "
                  f"(balanced {s['balanced_step_cycles']:,} cycles); "
                  f"busiest chip took {s['expert_imbalance']:.2f}x the mean tokens; landing buffer peak "
                  f"{s['landing_bytes_peak']:,} B of a static {s['landing_bytes_static']:,} B")
        if "landing_bytes_per_chip" in s:
            print(f"  landing buffers per chip: {' / '.join(f'{b:,}' for b in s['landing_bytes_per_chip'])} B landed, "
                  f"{' / '.join(f'{b:,}' for b in s['landing_reserved_per_chip'])} B held by the policy; oracle: "
                  f"{s['premature_free']} premature frees, {s['use_after_free']} uses after free, {s['leaks']} leaks, "
                  f"{s['live_at_end']} live at end")
        if s.get("tokens") is not None and s.get("token_unit"):  # a serving system: its tokens, as a chip run's
            print(f"  {s['tokens']:,} {s['token_unit']}, {s['tokens'] / s['sim_seconds']:,.0f} {s['token_unit']}/s; "
                  f"{s['requests_finished'] + s['requests_failed']} requests, {s['requests_failed']} failed")
        if s.get("mean_mu_utilization") is not None:  # a serving system: a chip's steps' memory
            print(f"  MU utilisation (a chip, the steps' anchors' plans) peak {s['peak_mu_utilization']:.3f}, mean "
                  f"{s['mean_mu_utilization']:.3f}; reserved peak {s['peak_mu_reserved']:.3f}; fragmentation "
                  f"{s['fragmentation']:.3f}; HBM (every chip) read {s['hbm_read_bytes']:,} B, written "
                  f"{s['hbm_write_bytes']:,} B in {s['hbm_flows']:,} flows")
        _energy(s)
        _serving(s)
        print(f"  status {s['status']}" + (f": {s['status_detail']}" if s["status_detail"] else ""))
        print(f"  result hash {s['result_hash']}")
    return _saved(args, result, out, [summary])


def add_arguments(p) -> None:
    p.add_argument("config", help="TOML config ([chip], [noc], [memory], [workload], [run])")
    add_run_arguments(p)
    p.add_argument("--network", help="NoC fidelity: cycle or packet (noc.model)")
    common.add_run_out_arguments(p, "run_summary, run_mu_series, run_buffers, run_links, run_energy "
                                    "(a system: system_*)")
    p.add_argument("--json", action="store_true", help="print the run's figures as one JSON object")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace (ui.perfetto.dev)")
    p.add_argument("--memory-map", dest="memory_map", type=int, metavar="CYCLE",
                   help="write every MU's block map at this cycle (memory_map_CYCLE.txt/.json, in --out or .)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def run(args) -> int:
    if args.memory_map is not None and args.memory_map < 0:
        raise UserError(f"--memory-map {args.memory_map}: the cycle cannot be negative")
    cfg = load(RUN_SCHEMA, args.config, args.overrides, flag_values(args, FLAGS))
    out = check_outputs(args)  # before the work: a bad path costs a second, not a run
    from cluster.jobs.job import execute  # imported late: keeps `rdasim run --help` quick
    from cluster.jobs.run import run_job

    job = run_job(cfg, trace=bool(args.trace), memory_map=args.memory_map)
    result = execute(job, quiet=args.quiet or args.json)
    if result.summary.command == "system":
        return _system(args, result, out)
    s = dict(result.summary)
    keys = JSON_KEYS + ENERGY_KEYS + tuple(k for k in MAPPED_KEYS if k in s) + tuple(
        k for k in INPUT_KEYS if s.get(k) is not None) + tuple(k for k in SERVING_KEYS if k in s) + tuple(
        k for k in TIER_KEYS if k in s)
    figures = {**{k: json_safe(s[k]) if k != "partitions" else s[k] for k in keys}, **distributed(s)}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{s['workload']} on {s['chip']} ({s['rows']} x {s['cols']} tiles), {s['network']} NoC, "
              f"policy {s['policy']}, reclaim {s['reclaim']}, {s['shards']} shard(s) on {s['backend']}")
        print(f"  simulated {s['sim_cycles']:,} cycles ({s['sim_seconds'] * 1e6:,.1f} us) in {s['wall_seconds']:.2f} s"
              f"{' (cut off at run.max_cycles)' if s['cut_off'] else ''}")
        unit = s["token_unit"]
        print(f"  {s['tokens']:,} {unit}, {s['tokens_per_second']:,.0f} {unit}/s; request latency p50 "
              f"{s['latency_p50_cycles']:,.0f} / p99 {s['latency_p99_cycles']:,.0f} cycles; "
              f"{s['requests']} requests, {s['requests_failed']} failed")
        priced = " (the steps' anchors' plans)" if s.get("memory_priced") else ""
        print(f"  MU utilisation{priced} peak {s['peak_mu_utilization']:.3f}, mean {s['mean_mu_utilization']:.3f}; "
              f"reserved peak {s['peak_mu_reserved']:.3f}; fragmentation {s['fragmentation']:.3f}; "
              f"bytes copied {s['bytes_copied']:,}")
        print(f"  {s['messages_total']:,} messages ({s['sync_messages']:,} for synchronisation, "
              f"{s['sync_wait_cycles']:,} cycles waited on them); out of memory {s['oom_events']} times "
              f"(stalls {s['stalls']}, evictions {s['evictions']}, failures {s['oom_failures']})")
        if "seconds_per_pass_simulated" in s:  # a mapped run: the simulated time beside DFModel's
            print(f"  seconds per graph pass: simulated {s['seconds_per_pass_simulated']:.6g}, DFModel "
                  f"{s['seconds_per_pass_analytic']:.6g}; per batch: simulated {s['seconds_per_batch_simulated']:.6g}, "
                  f"DFModel {s['seconds_per_batch_analytic']:.6g}")
        _energy(s)
        if s.get("spill") is not None:
            print(f"  spill ({s['spill']}): {s['spilled_blocks']:,} blocks on other MUs than their buffer's, "
                  f"{s['spilled_bytes']:,} B written to them, {s['remote_reads']:,} remote reads")
        tiers = [t for t in ("hbm", "ddr") if f"{t}_flows" in s]
        if tiers:
            print("  tiers: " + "; ".join(
                f"{t.upper()} read {s[f'{t}_read_bytes']:,} B, written {s[f'{t}_write_bytes']:,} B in "
                f"{s[f'{t}_flows']:,} flows, peak {s[f'{t}_peak_bytes']:,} B of pages" for t in tiers)
                  + (f"; {s['tier_full_events']} refused (full)" if s["tier_full_events"] else ""))
        _serving(s)
        if s.get("moe_skew_measured") is not None:
            print(f"  routing: measured Zipf skew {s['moe_skew_measured']:.3f}, busiest expert "
                  f"{s['moe_load_imbalance']:.2f}x the mean per step")
        print(f"  oracle: use after free {s['use_after_free']}, double free {s['double_free']}, "
              f"premature free {s['premature_free']}, leaks {s['leaks']}, "
              f"live at end {s['live_at_end']}")
        line = describe_distribution(s)
        if line:
            print(f"  {line}")
        print(f"  result hash {s['result_hash']}")
        print(f"  status {s['status']}" + (f": {s['status_detail']}" if s["status_detail"] else ""))
    return _saved(args, result, out, [figures])


def _saved(args, result, out, printed: list[dict]) -> int:
    """Write the run's files (--out, --trace, --memory-map), say where, and the exit status of its outcome.
    Files that cannot be written lose nothing: the figures are printed as JSON instead."""
    from cluster.results import writer

    def write() -> list:
        files = [writer.put(result.files["trace.json"], args.trace)] if "trace.json" in result.files else []
        maps = [n for n in result.files if n.startswith("memory_map_")]
        if out is not None:
            files += result.write(out, skip=("trace.json",))
        elif maps:
            files += result.write_side(Path("."), maps)
        return files

    report_files(save(write, printed, printed=args.json))
    s = result.summary
    if s.status != "completed":
        print(f"{s.status}: {s.status_detail}", file=sys.stderr)
    return result.exit_status


def one(unit: str) -> str:
    """One of a plural unit: "generated tokens" -> "generated token", "graph passes" -> "graph pass"."""
    noun, sep, rest = unit.partition(" (")
    noun = noun[:-2] if noun.endswith("sses") else noun[:-1] if noun.endswith("s") else noun
    return noun + sep + rest


def check_outputs(args) -> layout.RunOutput | None:
    """Every path the run will write, tried before it starts; the --out directory (None without one)."""
    out = common.prepare_out(args)
    if args.trace:
        io.check_file(args.trace, "--trace")
    if args.memory_map is not None and not args.out:
        io.check_dir(".", "--memory-map (the current directory)")
    return out


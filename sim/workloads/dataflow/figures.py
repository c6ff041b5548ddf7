"""A dataflow run's figures: each partition's simulated time beside DFModel's analytic one
(and which of its terms bounds it), each kernel's activity, and the per-pass summary."""

from __future__ import annotations

from typing import Any

from sim.chip.records import HomeRecord, KernelRecord, PartitionRecord
from sim.workloads.dataflow.compile import CompiledRun

PARTITION_COLUMNS = ("partition", "index", "kernels", "tiles", "simulated_seconds", "setup_seconds", "analytic_seconds",
                     "ratio", "bound", "compute_seconds", "memory_seconds", "network_seconds", "traffic_byte_hops",
                     "traffic_bound", "status")
KERNEL_COLUMNS = ("partition", "kernel", "cus", "compute_cycles", "busy", "bytes_in", "bytes_out", "start", "end")


def summarise(params: CompiledRun, logged: list, clock_hz: float) -> tuple[dict, dict]:
    """Per-partition simulated and analytic seconds, per-kernel activity: summary and tables."""
    parts = sorted((r for r in logged if isinstance(r, PartitionRecord)), key=lambda r: r.partition)
    kernels = sorted((r for r in logged if isinstance(r, KernelRecord)), key=KernelRecord.row)
    n = len(params.partitions)
    rows: list[dict[str, Any]] = []
    for r in parts:
        prog = params.partitions[r.partition % n]
        sim = (r.end - r.start) / clock_hz
        rows.append({"partition": r.partition, "index": r.index, "kernels": len(prog.kernels),
                     "tiles": prog.tiles, "simulated_seconds": sim,
                     "setup_seconds": (r.started - r.start) / clock_hz,
                     "analytic_seconds": prog.analytic_seconds,
                     "ratio": sim / prog.analytic_seconds if prog.analytic_seconds > 0 else float("nan"),
                     "bound": prog.bound, "compute_seconds": prog.compute_seconds,
                     "memory_seconds": prog.memory_seconds, "network_seconds": prog.network_seconds,
                     "traffic_byte_hops": prog.traffic, "traffic_bound": prog.traffic_bound, "status": r.status})
    by: dict[tuple[int, str], dict[str, Any]] = {}
    for k in kernels:
        key = (k.partition, k.kernel)
        a = by.setdefault(key, {"partition": k.partition, "kernel": k.kernel, "cus": 0, "compute_cycles": 0,
                                "bytes_in": 0, "bytes_out": 0, "start": k.start, "end": k.end})
        a["cus"] += 1
        a["compute_cycles"] += k.compute_cycles
        a["bytes_in"] += k.bytes_in
        a["bytes_out"] += k.bytes_out
        a["start"], a["end"] = min(a["start"], k.start), max(a["end"], k.end)
    span = {r.partition: max(1, r.end - r.started) for r in parts}
    krows = [{**a, "busy": a["compute_cycles"] / (a["cus"] * span.get(a["partition"], 1))}
             for _, a in sorted(by.items())]
    simulated = sum(r["simulated_seconds"] for r in rows) / max(1, params.passes)
    scale = params.seconds_per_batch / params.pass_seconds if params.pass_seconds > 0 else 1.0
    summary = {
        "seconds_per_pass_simulated": simulated, "seconds_per_pass_analytic": params.pass_seconds,
        "seconds_per_batch_simulated": simulated * scale, "seconds_per_batch_analytic": params.seconds_per_batch,
        "partitions": [{"index": r["index"], "kernels": list(params.partitions[r["partition"] % n].kernels),
                        "simulated_seconds": r["simulated_seconds"], "analytic_seconds": r["analytic_seconds"],
                        "bound": r["bound"]} for r in rows],
    }
    switch = [r for r in logged if isinstance(r, HomeRecord) and r.what == "switch"]
    if switch:  # weights homed in a later tier were copied into the first before the first pass
        summary["model_switch_seconds"] = sum(r.end - r.start for r in switch) / clock_hz
    cols = lambda rs, keys: {k: [r[k] for r in rs] for k in keys}  # noqa: E731
    tables = {"partitions": cols(rows, PARTITION_COLUMNS), "kernels": cols(krows, KERNEL_COLUMNS)}
    return summary, tables

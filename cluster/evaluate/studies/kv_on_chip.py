"""Virtualisation against realloc-and-copy and static allocation, with the KV cache on chip: a decode step
of one Llama-3.1-8B layer on the whole sn40l, its K and V caches in MUs growing a token a sequence a
pass, under each policy (one buffer per MU, several, virtual blocks)."""

from __future__ import annotations

import math

from cluster.evaluate.studies.common import bars, ids, num, pick
from cluster.evaluate.study import Check, Row, Study, col

CASES: dict[str, dict[str, object]] = {
    "virtual 4KiB blocks": {"memory.policy": "virtual", "memory.block_bytes": "4KiB"},
    "realloc-copy x2": {"memory.policy": "realloc-copy", "memory.initial_bytes": "4KiB", "memory.growth": 2.0},
    "static-multi (4 per MU)": {"memory.policy": "static-multi", "memory.buffers_per_mu": 4},
    "static-single (1 per MU)": {"memory.policy": "static-single"},
    "realloc-copy x1.5": {"memory.policy": "realloc-copy", "memory.initial_bytes": "4KiB", "memory.growth": 1.5},
    "virtual 1KiB blocks": {"memory.policy": "virtual", "memory.block_bytes": "1KiB"},
}
ENDED = ("completed", "deadlocked", "failed")


def table_overhead(block_bytes: int, chip: str = "sn40l") -> str:
    """The block table's size a MU, in closed form: one entry a block of the MU, each naming any block of
    the chip (blocks may live in another MU) plus a valid bit, against the MU's capacity."""
    from mapping.chips import RDA_PRESETS

    c = RDA_PRESETS[chip]
    mus = c.mu_count
    entries = c.mu_bytes // block_bytes
    bits = math.ceil(math.log2(mus * entries)) + 1
    return (f"virtualisation's own cost, closed form on {chip} ({mus:,} MUs of {c.mu_bytes // 1024} KiB), "
            f"{block_bytes // 1024} KiB blocks: {entries} block-table entries a MU of {bits} bits, "
            f"{entries * bits / 8:,.0f} B = {entries * bits / 8 / c.mu_bytes:.3%} of the MU; a lookup costs no "
            "extra cycle in the model (within the MU's SRAM latency, sim/chip/memory_unit.py) and is priced in "
            "energy (the 45 nm table's translation)")  # a run that cannot serve says so, never 0 tokens silently


def _points(quick: bool) -> list[dict]:
    chosen = list(CASES.values())[:4] if quick else list(CASES.values())
    passes = 2 if quick else 4
    return [{**c, "workload.dataflow.passes": passes} for c in chosen]


def _case(r: Row) -> str:
    p = r.get("policy") or r.get("memory_policy")  # a point refused before running has only its swept values
    if p == "virtual":
        return f"virtual {int(r.get('block_bytes') or 0) // 1024}KiB blocks"
    if p == "realloc-copy":
        return f"realloc-copy x{r.get('memory_growth'):g}" if r.get("memory_growth") else "realloc-copy"
    return {"static-multi": "static-multi (4 per MU)", "static-single": "static-single (1 per MU)"}.get(str(p), str(p))


def _judge(rows: list[Row]) -> list[Check]:
    out = []
    v = pick(rows, policy="virtual")
    if v:
        out.append(Check("virtual completes the step and copies nothing", f"{v['status']}, "
                         f"{num(v['bytes_copied'])} B copied", "completed, 0 B (blocks are mapped, never moved)",
                         v["status"] == "completed" and v["bytes_copied"] == 0, ids(v)))
    for r in rows:
        if r.get("point_status") == "error":  # refused before it ran: its buffers cannot be placed
            why = (r.get("point_error") or "").strip().splitlines()[-1].strip()
            out.append(Check(f"{_case(r)}: ends as completed, or refused/deadlocked saying why",
                             f"does not fit: {why[:160]}", "refused before running, naming what does not fit",
                             "needs" in why, ids(r)))
        elif r.get("policy") != "virtual":
            out.append(Check(f"{_case(r)}: ends as completed, or deadlocked/failed saying why",
                             f"{r['status']}" + (f" ({r['status_detail'][:80]})" if r.get("status_detail") else ""),
                             "one of completed, deadlocked, failed (the toy's known result: static and realloc "
                             "policies can run out of room in a way nothing frees; benchmarks/memory_policies.py "
                             "study 6)", r["status"] in ENDED, ids(r)))
    one, many = pick(rows, policy="static-single"), pick(rows, policy="static-multi")
    if one and many and "completed" == one["status"] == many["status"]:
        out.append(Check("several buffers per MU hold at least as much at their peak as one",
                         f"peak MU utilisation {many['peak_mu_utilization']:.4f} (4 per MU) vs "
                         f"{one['peak_mu_utilization']:.4f} (1 per MU)", ">= (the toy's known result, study 2)",
                         many["peak_mu_utilization"] >= one["peak_mu_utilization"], ids(many, one)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("step cycles", "sim_cycles"),
                              ("peak MU reserved", "peak_mu_reserved"),
                              ("peak MU utilisation", "peak_mu_utilization"),
                              ("bytes copied", "bytes_copied")),
                plt, "Llama-3.1-8B layer decode, KV in MUs, sn40l")


STUDY = Study(
    name="kv-on-chip", title="Virtualisation vs realloc-copy vs static with the KV cache on chip",
    question="With a real layer's KV caches in MUs (kv = \"mu\"), what do virtual blocks buy over reserving and "
             "copying on growth, and over one or several static buffers per MU?",
    scale="real: one Llama-3.1-8B layer (GQA, SwiGLU, weights from HBM) mapped over the whole sn40l, 8 sequences "
          "of 1,024 tokens; the full model is the layer kernel-looped, so one layer shows the MUs' behaviour",
    base="decode_kv_mu_sn40l.toml", points=_points, case=_case,
    columns=(col("status", "status", "{}"), col("cycles", "sim_cycles", "{:,}"),
             col("peak reserved", "peak_mu_reserved", "{:.4f}"), col("peak util.", "peak_mu_utilization", "{:.4f}"),
             col("bytes copied", "bytes_copied", "{:,}"), col("energy J", "energy_joules", "{:.4g}")),
    judge=_judge, draw=_draw, notes=(table_overhead(4096), table_overhead(1024)))

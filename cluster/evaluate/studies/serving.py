"""Virtualisation vs realloc-and-copy vs static allocation serving Llama-3.1-8B on one sn40l socket from a
window of a trace in the Azure 2023 code trace's format and rate (examples/serve_llama8b_sn40l.toml)."""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids, num, pick, served
from cluster.evaluate.study import Check, Row, Study, col

POLICIES = ("virtual", "static-single", "realloc-copy", "static-multi")


def _points(quick: bool) -> list[dict]:
    chosen, window = (POLICIES[:2], "10s") if quick else (POLICIES, "60s")
    return [{"memory.policy": p, "workload.decode.trace_duration": window} for p in chosen]


def _case(r: Row) -> str:
    return str(r.get("policy"))


def _judge(rows: list[Row]) -> list[Check]:
    out = []
    for r in rows:
        n = int(r.get("requests") or 0)
        out.append(Check(f"{_case(r)} serves every request of the window", f"{served(r)} served",
                         f"{n}/{n}: the KV is in HBM (64 GB), far from full (docs/run.md, Serving real models: "
                         "every policy serves 64 of 64 on the minute)", r.get("requests_finished") == n > 0, ids(r)))
    v, s = pick(rows, policy="virtual"), pick(rows, policy="static-single")
    if v and s and v.get("ttft_p50_seconds") and s.get("ttft_p50_seconds"):
        ratio = s["ttft_p50_seconds"] / v["ttft_p50_seconds"]
        out.append(Check("static-single's prefill is slower: its one-CU kernels' tile buffers take an MU each",
                         f"TTFT p50 {num(s['ttft_p50_seconds'] * 1e3)} ms vs {num(v['ttft_p50_seconds'] * 1e3)} ms "
                         f"({ratio:.2f}x)", "about 2x (docs/run.md: 107 ms against 52.9 ms on the minute, its "
                         "1,024-token prefill anchor at 2.48x the roofline)", 1.5 <= ratio <= 2.6, ids(s, v)))
    if v:
        out.append(Check("virtual copies nothing", f"{num(v['bytes_copied'])} B", "0", v["bytes_copied"] == 0, ids(v)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("tokens / s", "tokens_per_second"),
                              ("TTFT p50 (ms)", lambda r: (r.get("ttft_p50_seconds") or 0) * 1e3),
                              ("TBT p50 (ms)", lambda r: (r.get("tbt_p50_seconds") or 0) * 1e3),
                              ("HBM peak (GB)", lambda r: (r.get("hbm_peak_bytes") or 0) / 1e9)),
                plt, "Llama-3.1-8B served on one sn40l socket")


STUDY = Study(
    name="serving", title="Serving Llama-3.1-8B: virtualisation vs realloc-copy vs static",
    question="Serving a public-format trace, what do the memory policies change in throughput, TTFT/TBT, memory "
             "and copies?",
    scale="real: Llama-3.1-8B on one sn40l socket, examples/traces/azure_code_pressure.csv (the Azure 2023 code "
          "trace's format and first-minute rate) at its recorded times; --quick takes its first 10 s",
    base="serve_llama8b_sn40l.toml", points=_points, case=_case,
    columns=(col("served", "requests_finished", "{}"), col("tokens/s", "tokens_per_second", "{:,.1f}"),
             col("TTFT p50 s", "ttft_p50_seconds", "{:.4g}"), col("TTFT p99 s", "ttft_p99_seconds", "{:.4g}"),
             col("TBT p50 s", "tbt_p50_seconds", "{:.4g}"), col("HBM peak B", "hbm_peak_bytes", "{:,}"),
             col("bytes copied", "bytes_copied", "{:,}"), col("anchors", "anchors", "{}"),
             col("anchor E max", "anchor_efficiency_max", "{:.3g}")),
    judge=_judge, draw=_draw)

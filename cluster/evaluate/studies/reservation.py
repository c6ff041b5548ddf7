"""The KV cache in HBM reserved as the pre-paging servers did against paged blocks, as the vLLM paper
(Kwon et al., SOSP 2023) compares Orca's variants: the batch each reaches and what it serves.

Llama-3.1-8B on one sn40l socket whose HBM leaves the KV the room of the paper's OPT-13B server
(Table 1: 15.7K token slots; here 982 pages of 2 MiB, 15,712 tokens), requests with the ShareGPT
lengths of its Figure 11 arriving faster than any variant serves them (40 a second), so every
variant runs with its queue full and its batch is what its memory admits
(cluster/evaluate/bases/serve_reservation_sn40l.toml). The paper's figures the rows are held to:

- Figure 13 (OPT-13B, ShareGPT at 2 requests/s): average batched requests Orca (Max) 7.00, Orca
  (Pow2) 9.81, Orca (Oracle) 13.62, vLLM 30.42;
- Figure 2: the share of each system's KV memory holding token states: Orca (Max) 20.4% (13.3%
  reservation, 57.3% internal and 8.9% external fragmentation), Orca (Pow2) 26.8% (17.9, 13.6,
  41.6), Orca (Oracle) 38.2% (25.2 reservation, 36.6 external), vLLM 96.3%.

The reserving variants here take whole pages from a paged tier: none loses memory to external
fragmentation, which the paper's buddy allocator did. The references leave it out: a variant's
token share is the paper's over its memory less the external part (Max 20.4 / 91.1 = 22.4%, Pow2
26.8 / 58.4 = 45.9%, Oracle 38.2 / 63.4 = 60.3%), and paged's batch over a variant's is the
paper's ratio times that variant's share not lost to it (exact: 30.42 / 13.62 x 0.634 = 1.42x;
pow2: 30.42 / 9.81 x 0.584 = 1.81x; max: 30.42 / 7.00 x 0.911 = 3.96x).
"""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids, num, pick
from cluster.evaluate.study import Check, Row, Study, col

KINDS = ("max", "pow2", "exact", "paged")  # the paper's order: Orca (Max), (Pow2), (Oracle), vLLM
LABEL = {"max": "max (Orca Max)", "pow2": "pow2 (Orca Pow2)", "exact": "exact (Orca Oracle)", "paged": "paged (vLLM)"}
KV_PAGES, MAX_PAGES = 982, 2048 // 16  # the base's KV room, and Orca (Max)'s 2,048 tokens in 16-token pages
# Figure 2's token-state share over the memory not lost to external fragmentation (module docstring)
TOKEN_SHARE = {"max": 20.4 / (100 - 8.9), "pow2": 26.8 / (100 - 41.6), "exact": 38.2 / (100 - 36.6), "paged": 0.963}
FIG13 = {"max": 7.00, "pow2": 9.81, "exact": 13.62, "paged": 30.42}  # ShareGPT, 2 requests/s
EXTERNAL = {"max": 8.9, "pow2": 41.6, "exact": 36.6}  # Figure 2: external fragmentation and others, %
SHARE_TOLERANCE, RATIO_TOLERANCE = 0.05, 0.25


def _points(quick: bool) -> list[dict]:
    n = 200 if quick else 400
    return [{"workload.decode.kv_reservation": k, "workload.decode.requests": n} for k in KINDS]


def _kind(r: Row) -> str:
    return str(r.get("workload_decode_kv_reservation"))


def _case(r: Row) -> str:
    return LABEL.get(_kind(r), _kind(r))


def _paper_ratio(kind: str) -> float:
    """vLLM's batch over the variant's in Figure 13, with the variant's external fragmentation taken away."""
    return FIG13["paged"] / FIG13[kind] * (100 - EXTERNAL[kind]) / 100


def _judge(rows: list[Row]) -> list[Check]:
    got = {k: pick(rows, workload_decode_kv_reservation=k) for k in KINDS}
    out = []
    m = got["max"]
    if m:
        out.append(Check("Orca (Max) runs as many requests as its 2,048-token reservations fit the KV room",
                         f"batch {m.get('batch_max')} at most", f"floor({KV_PAGES} / {MAX_PAGES}) = "
                         f"{KV_PAGES // MAX_PAGES}; the paper's 7.00 (Figure 13: 15.7K slots / 2,048)",
                         m.get("batch_max") == KV_PAGES // MAX_PAGES, ids(m)))
    present = [r for r in (got[k] for k in KINDS) if r is not None]
    if len(present) == len(KINDS):
        for field, what in (("batch_mean", "mean batch"), ("tokens_per_second", "tokens/s")):
            vals = [float(r.get(field) or 0.0) for r in present]
            out.append(Check(f"the less a request reserves, the larger the {what}: max < pow2 < exact < paged",
                             " < ".join(num(v) for v in vals), "the paper's order (Figure 13: 7.00 < 9.81 < 13.62 "
                             "< 30.42 batched requests; Figure 12: vLLM's rate highest, Orca (Max)'s lowest)",
                             all(a < b for a, b in zip(vals, vals[1:])), ids(*present)))
    for k in KINDS:
        r = got[k]
        if r is None or r.get("kv_used_share") is None:
            continue
        want = TOKEN_SHARE[k]
        share = float(r["kv_used_share"])
        less = ", less external fragmentation" if k != "paged" else ""
        out.append(Check(f"{_case(r)}: share of its reserved KV holding tokens", f"{share:.3f}",
                         f"{want:.3f} +- {SHARE_TOLERANCE} (Figure 2{less})",
                         abs(share - want) <= SHARE_TOLERANCE, ids(r)))
    p = got["paged"]
    for k in ("exact", "pow2", "max"):
        r = got[k]
        if p is None or r is None or not r.get("batch_mean"):
            continue
        ratio, want = float(p["batch_mean"]) / float(r["batch_mean"]), _paper_ratio(k)
        out.append(Check(f"paged batches more than {_case(r)}", f"{ratio:.2f}x ({num(p['batch_mean'])} / "
                         f"{num(r['batch_mean'])})", f"{want:.2f}x +- {RATIO_TOLERANCE:.0%} (Figure 13's "
                         f"{FIG13['paged']} / {FIG13[k]}, {EXTERNAL[k]}% external fragmentation taken away)",
                         abs(ratio / want - 1) <= RATIO_TOLERANCE, ids(p, r)))
    return out


def _draw(rows: list[Row], plt):
    fig = bars(rows, _case, (("mean batch (sequences)", "batch_mean"),
                             ("tokens / s", "tokens_per_second"),
                             ("TTFT p50 (s)", "ttft_p50_seconds"),
                             ("KV peak (GB): reserved, used hatched",
                              lambda r: (r.get("kv_reserved_peak_bytes") or 0) / 1e9),
                             ("share of reserved KV used", "kv_used_share")),
               plt, "Llama-3.1-8B on sn40l, KV room of vLLM's OPT-13B server: reserved ahead vs paged")
    used = [(r.get("kv_used_peak_bytes") or 0) / 1e9 for r in rows]
    fig.axes[3].bar(range(len(rows)), used, width=0.45, color="white", edgecolor="black", hatch="//")
    return fig


STUDY = Study(
    name="reservation", title="KV reserved ahead (Orca's Max, Pow2, Oracle) vs paged blocks in HBM",
    question="With the KV cache in HBM, what batch and throughput does reserving each request's KV ahead (the "
             "maximum length, a power of two, the exact length) reach against paged blocks?",
    scale="real: Llama-3.1-8B on one sn40l socket, HBM leaving the KV 982 pages (15,712 tokens: vLLM's OPT-13B "
          "server, Table 1), ShareGPT lengths (Figure 11) at 40 requests/s; 400 requests (--quick: 200); steps "
          "priced at their roofline (step_roofline)",
    base="serve_reservation_sn40l.toml", points=_points, case=_case,
    columns=(col("served", "requests_finished", "{}"), col("batch max", "batch_max", "{}"),
             col("batch mean", "batch_mean", "{:.2f}"), col("tokens/s", "tokens_per_second", "{:,.0f}"),
             col("TTFT p50 s", "ttft_p50_seconds", "{:.3g}"),
             col("KV reserved peak B", "kv_reserved_peak_bytes", "{:,}"),
             col("KV used peak B", "kv_used_peak_bytes", "{:,}"), col("used / reserved", "kv_used_share", "{:.3f}"),
             col("preemptions", "preemptions", "{}")),
    judge=_judge, draw=_draw,
    notes=("The reserving variants take whole 2 MiB pages from the tier: unlike the paper's buddy allocator they "
           "lose nothing to external fragmentation, so the references leave it out (module docstring of "
           "cluster/evaluate/studies/reservation.py).",
           "Paged's batch grows with the window (its queue stays full longer): paged's mean batch over exact's, "
           "pow2's and max's was 1.40x, 1.68x, 3.81x at 200 requests, 1.56x, 1.89x, 4.41x at 400, 1.59x, 1.92x, "
           "4.77x at 1,000 (measured while building the study)."))

"""Many buffers per MU against one: every sequence of a kv-decode admitted at once, so the number of
buffers an MU may hold bounds how many sequences run (plasticine: 64 MUs, 8 KV buffers a sequence, so
one buffer per MU runs at most 64 / 8 = 8 sequences at once)."""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids, pick
from cluster.evaluate.study import Check, Row, Study, col

CASES = ({"memory.policy": "static-single"}, {"memory.policy": "static-multi", "memory.buffers_per_mu": 4},
         {"memory.policy": "virtual", "memory.block_bytes": "4KiB"})


def _points(quick: bool) -> list[dict]:
    n = 12 if quick else 24
    load = {"workload.decode.requests": n, "workload.decode.max_batch": n,
            "workload.decode.prompt_tokens": {"dist": "uniform", "min": 64, "max": 384},
            "workload.decode.output_tokens": {"dist": "uniform", "min": 16, "max": 64}}
    return [{**c, **load} for c in CASES]


def _case(r: Row) -> str:
    return {"static-single": "static-single (1 per MU)", "static-multi": "static-multi (4 per MU)"}.get(
        str(r.get("policy")), str(r.get("policy")))


def _judge(rows: list[Row]) -> list[Check]:
    one, many, v = pick(rows, policy="static-single"), pick(rows, policy="static-multi"), pick(rows, policy="virtual")
    out = []
    if one and many:
        out.append(Check("several buffers per MU reach a higher peak utilisation than one",
                         f"{many['peak_mu_utilization']:.4f} vs {one['peak_mu_utilization']:.4f}",
                         "higher (benchmarks/memory_policies.py study 2, the toy's known result)",
                         many["peak_mu_utilization"] > one["peak_mu_utilization"], ids(many, one)))
        ratio = many["tokens_per_second"] / one["tokens_per_second"]
        out.append(Check("and serve the sequences faster", f"{ratio:.2f}x tokens/s",
                         "> 1: one buffer per MU runs at most 8 of the sequences at once (64 MUs / 8 buffers each)",
                         ratio > 1, ids(many, one)))
    if v and one:
        out.append(Check("virtual blocks serve them at least as fast as one buffer per MU",
                         f"{v['tokens_per_second'] / one['tokens_per_second']:.2f}x tokens/s", ">= 1",
                         v["tokens_per_second"] >= one["tokens_per_second"], ids(v, one)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("peak MU utilisation", "peak_mu_utilization"),
                              ("tokens / s", "tokens_per_second")),
                plt, "Buffers per MU: every sequence at once (toy, plasticine)")


STUDY = Study(
    name="buffers-per-mu", title="Buffers per MU: static-single vs static-multi vs virtual",
    question="How much more do several buffers per MU (or virtual blocks) hold and serve than one buffer per MU?",
    scale="toy (plasticine, 2 layers x 2 heads); at real scale see kv-on-chip, whose static-single and "
          "static-multi rows are the same question on one Llama-3.1-8B layer on sn40l",
    base="kv_decode.toml", points=_points, case=_case,
    columns=(col("status", "status", "{}"), col("peak util.", "peak_mu_utilization", "{:.4f}"),
             col("mean util.", "mean_mu_utilization", "{:.4f}"), col("tokens/s", "tokens_per_second", "{:,.0f}"),
             col("stalls", "stalls", "{:,}")),
    judge=_judge, draw=_draw)

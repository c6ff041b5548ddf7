"""The weight design: how many bits a partial-free reference weight needs for the sharing degree of the
real programs, and the top-ups (weight requests) a narrower width costs.

Closed form: under the halving split a token's activation is shared by its top_k experts, so the
weight halves top_k times; a width of b bits holds 2**(b-1) and needs no top-up iff top_k <= b - 1,
i.e. from b = top_k + 1 on (Mixtral top-2: 3 bits; Qwen3 top-8: 9 bits)."""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids
from cluster.evaluate.studies.moe_widths import model_of, point, widths
from cluster.evaluate.study import Check, Column, Row, Study, col

BITS = {"mixtral-8x7b": (2, 3, 4, 8), "qwen3-30b-a3b": (2, 4, 6, 8, 9, 10)}
QUICK_BITS = {"mixtral-8x7b": (2, 3), "qwen3-30b-a3b": (4, 8, 9)}


def _points(quick: bool) -> list[dict]:
    steps, tokens = (1, 32) if quick else (2, 64)
    chosen = QUICK_BITS if quick else BITS
    return [point(m, steps, tokens, policy="virtual", reclaim="partial-free", weight_bits=b, split="halve")
            for m, bits in chosen.items() for b in bits]


def _case(r: Row) -> str:
    return f"{model_of(r)}: {r.get('weight_bits')} bits"


def requests(r: Row) -> int:
    return int(r.get("messages_weight_request") or 0)


def _judge(rows: list[Row]) -> list[Check]:
    out = []
    for model in BITS:
        rs = [r for r in rows if model_of(r) == model]
        if not rs:
            continue
        k = widths(model)["top_k"]
        need = k + 1
        got = {r["weight_bits"]: requests(r) for r in rs}
        holds = all((n == 0) == (b >= need) for b, n in got.items())
        out.append(Check(f"{model} (top-{k}): top-ups needed below top_k + 1 = {need} bits, none from it on",
                         ", ".join(f"{b} bits: {n:,}" for b, n in sorted(got.items())) + " weight requests",
                         f"0 iff bits >= {need} (halving split: 2**(bits-1) >= 2**top_k)", holds, ids(*rs)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("weight requests (top-ups)", requests),
                              ("sync wait cycles", "sync_wait_cycles"),
                              ("tokens / s", "tokens_per_second")),
                plt, "Weight width of partial-free references, sn40l")


STUDY = Study(
    name="weight-design", title="Weight design: bits and split for the real programs' sharing degree",
    question="Which weight width does the sharing degree of Mixtral's and Qwen3's routing call for, and what do "
             "narrower widths cost in top-ups?",
    scale="real widths on sn40l (Mixtral-8x7B top-2, Qwen3-30B-A3B top-8); split: halve",
    base="moe_mixtral.toml", points=_points, case=_case,
    columns=(Column("weight requests", requests, "{:,}"), col("top-ups", "weight_topups", "{:,}"),
             col("sync wait cycles", "sync_wait_cycles", "{:,}"), col("tokens/s", "tokens_per_second", "{:,.0f}")),
    judge=_judge, draw=_draw)

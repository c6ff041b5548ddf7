"""Switch Transformers at a published width: 128 experts, top-1 (Switch-Base-128), under the three
reclamation protocols and at the narrowest weight (top-1: 2 bits need no top-up)."""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids, pick
from cluster.evaluate.studies.moe_widths import point
from cluster.evaluate.studies.reclamation import COLUMNS, protocol_checks, violations
from cluster.evaluate.study import Check, Row, Study

MODEL = "switch-base-128"


def _points(quick: bool) -> list[dict]:
    steps, tokens = (1, 64) if quick else (4, 256)
    return [point(MODEL, steps, tokens, policy="virtual", reclaim=p, weight_bits=2, split="halve")
            for p in ("refcount-gated", "partial-free", "refcount")]


def _case(r: Row) -> str:
    return f"switch-base-128: {r.get('reclaim')}"


def _judge(rows: list[Row]) -> list[Check]:
    out = [c for c in protocol_checks(rows, MODEL) if "plain refcount" not in c.what]
    w = pick(rows, reclaim="partial-free")
    if w:
        n = int(w.get("messages_weight_request") or 0)
        out.append(Check("top-1 routing: a 2-bit weight needs no top-up", f"{n:,} weight requests",
                         "0 (one reference a token: the weight halves once, 2**(2-1) = 2 >= 2**1)", n == 0, ids(w)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("tokens / s", "tokens_per_second"),
                              ("sync messages", "sync_messages"),
                              ("oracle violations", violations)),
                plt, "Switch-Base-128 (128 experts, top-1), sn40l")


STUDY = Study(
    name="switch", title="Switch Transformers: 128 experts, top-1",
    question="At Switch-Base-128's width (Fedus et al., JMLR 2022, Table 9: d_model 768, d_ff 3072, 128 experts, "
             "top-1), what do the reclamation protocols cost?",
    scale="real width on sn40l; routes drawn (Zipf 0.5)",
    base="moe_switch.toml", points=_points, case=_case, columns=COLUMNS, judge=_judge, draw=_draw)

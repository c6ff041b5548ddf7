"""Reclamation: partial-free against counter reference counting (gated, and plain as the racy
baseline) on MoE activations shared by top-k experts, at Mixtral-8x7B's and Qwen3-30B-A3B's widths."""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids, num, pick
from cluster.evaluate.studies.moe_widths import model_of, point
from cluster.evaluate.study import Check, Column, Row, Study, col

PROTOCOLS = ("refcount-gated", "partial-free", "refcount")
MODELS = ("mixtral-8x7b", "qwen3-30b-a3b")


def _points(quick: bool) -> list[dict]:
    steps, tokens = (1, 32) if quick else (4, 128)
    return [point(m, steps, tokens, policy="virtual", reclaim=p, weight_bits=10) for m in MODELS for p in PROTOCOLS]


def _case(r: Row) -> str:
    return f"{model_of(r)}: {r.get('reclaim')}"


def violations(r: Row) -> int:
    return int(r.get("use_after_free") or 0) + int(r.get("double_free") or 0) + int(r.get("premature_free") or 0)


def protocol_checks(rows: list[Row], model: str) -> list[Check]:
    """Partial-free against gated and plain counting on ``model``'s rows (the proposal's claims)."""
    rs = [r for r in rows if model_of(r) == model]
    g, w, p = (pick(rs, reclaim=x) for x in PROTOCOLS)
    out = []
    if g and w:
        out.append(Check(f"{model}: partial-free needs no synchronisation messages; gated counting does",
                         f"{num(w['sync_messages'])} vs {num(g['sync_messages'])} messages, "
                         f"{num(w['sync_wait_cycles'])} vs {num(g['sync_wait_cycles'])} wait cycles",
                         "0 for partial-free (its weights travel with the references: no ref/ack messages), "
                         "> 0 for gated", w["sync_messages"] == 0 < g["sync_messages"], ids(w, g)))
        out.append(Check(f"{model}: partial-free at least as fast as gated counting",
                         f"{num(w['tokens_per_second'] / g['tokens_per_second'])}x tokens/s",
                         ">= 1 (it waits for no acknowledgement)", w["tokens_per_second"] >= g["tokens_per_second"],
                         ids(w, g)))
    safe = [r for r in (g, w) if r]
    if safe:
        out.append(Check(f"{model}: the safe protocols free nothing early",
                         f"{sum(violations(r) for r in safe)} oracle violations",
                         "0 (the oracle: no use-after-free, double or premature free)",
                         all(violations(r) == 0 for r in safe), ids(*safe)))
    if p:
        out.append(Check(f"{model}: plain refcount races (what the safe protocols avoid)",
                         f"{violations(p)} oracle violations", "> 0 when a dec overtakes an inc (the toy's "
                         "known result, benchmarks/memory_policies.py study 3)", violations(p) > 0, ids(p)))
    return out


def _judge(rows: list[Row]) -> list[Check]:
    return [c for m in MODELS for c in protocol_checks(rows, m)]


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("tokens / s", "tokens_per_second"),
                              ("sync messages", "sync_messages"),
                              ("sync wait cycles", "sync_wait_cycles"),
                              ("oracle violations", violations)),
                plt, "Reclamation protocols on MoE activations, sn40l")


COLUMNS = (col("tokens/s", "tokens_per_second", "{:,.0f}"), col("step p50 cycles", "latency_p50_cycles", "{:,.0f}"),
           col("sync msgs", "sync_messages", "{:,}"), col("sync wait cycles", "sync_wait_cycles", "{:,}"),
           Column("violations", violations, "{}"), col("status", "status", "{}"))

STUDY = Study(
    name="reclamation", title="Reclamation: partial-free vs refcount-gated vs refcount",
    question="What do partial-free's weighted references save over counter reference counting on MoE activations "
             "read by top-k experts: throughput, latency, synchronisation messages and cycles, oracle violations?",
    scale="real widths on sn40l (Mixtral-8x7B: 8 experts top-2, hidden 4096, expert FFN 14336; Qwen3-30B-A3B: 128 "
          "experts top-8, hidden 2048, expert FFN 768); routes drawn (Zipf 0.5), not recorded",
    base="moe_mixtral.toml", points=_points, case=_case, columns=COLUMNS, judge=_judge, draw=_draw)

"""Speculative decoding (Leviathan et al., ICML 2023): the rejected drafts' KV truncated from every buffer
under each memory policy, and the acceptance held to its closed form.

Each of ``draft`` = k tokens is accepted with probability a up to the first rejection, so a step
makes E = (1 - a**(k+1)) / (1 - a) tokens (Leviathan et al. 2023, eq. 1) and has a rejection (a
truncate of every KV buffer) with probability 1 - a**k: over N decode tokens that is
N (1 - a**k) / E steps with truncates, each truncating all 2 x layers x heads buffers."""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids, num, pick
from cluster.evaluate.study import Check, Column, Row, Study, col

ACCEPT = 0.7
POLICIES = ("virtual", "realloc-copy", "static-multi")


def _points(quick: bool) -> list[dict]:
    drafts = (4,) if quick else (2, 4, 8)
    requests = 12 if quick else 24
    return [{"memory.policy": p, "workload.decode.draft": k, "workload.decode.accept": ACCEPT,
             "workload.decode.requests": requests} for k in drafts for p in POLICIES]


def _case(r: Row) -> str:
    return f"draft {r.get('workload_decode_draft')}: {r.get('policy')}"


def expected_truncating_steps(tokens: int, requests: int, k: int, a: float) -> float:
    """Steps with a rejection over ``tokens`` output tokens (the first of each sequence is its prefill's)."""
    per_step = (1 - a ** (k + 1)) / (1 - a)
    return (tokens - requests) * (1 - a ** k) / per_step


def _judge(rows: list[Row]) -> list[Check]:
    out = []
    for r in rows:
        if r.get("policy") != "virtual" or r.get("status") != "completed":
            continue
        k, buffers = int(r["workload_decode_draft"]), 2 * 2 * 2  # layers x heads x (K, V): the example's 2 x 2
        got = int(r.get("messages_truncate") or 0) / buffers
        want = expected_truncating_steps(int(r["tokens"]), int(r["requests"]), k, ACCEPT)
        out.append(Check(f"draft {k}, accept {ACCEPT}: steps that truncate rejected drafts",
                         f"{num(got)} (truncate messages / {buffers} buffers)",
                         f"{want:.1f} +- 15 % (closed form, module docstring; the draws are random and a "
                         "sequence's last step is cut to its length)", abs(got - want) <= 0.15 * want, ids(r)))
    for k in sorted({int(r["workload_decode_draft"]) for r in rows}):
        v, re = pick(rows, policy="virtual", workload_decode_draft=k), pick(rows, policy="realloc-copy",
                                                                             workload_decode_draft=k)
        if v and re:
            out.append(Check(f"draft {k}: virtual copies nothing when the drafts are rolled back",
                             f"{num(v['bytes_copied'])} B vs realloc-copy's {num(re['bytes_copied'])} B",
                             "0 B for virtual (truncation frees blocks in place)", v["bytes_copied"] == 0, ids(v, re)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("tokens / s", "tokens_per_second"),
                              ("peak MU reserved", "peak_mu_reserved"),
                              ("bytes copied", "bytes_copied")),
                plt, "Speculative decoding (toy, plasticine)")


STUDY = Study(
    name="spec-decode", title="Speculative decoding: rolling back rejected drafts under each policy",
    question="With draft tokens verified and the rejected ones' KV truncated, what does each policy cost?",
    scale="toy (plasticine, 2 layers x 2 heads, acceptance 0.7 a token): the spec-decode workload is the "
          "hand-written kv-decode one; a Llama-3.1-8B target with a Llama-3.2-1B draft is not built today",
    base="spec_decode.toml", points=_points, case=_case,
    columns=(col("status", "status", "{}"), col("tokens/s", "tokens_per_second", "{:,.0f}"),
             col("truncates", "messages_truncate", "{:,}"), col("peak reserved", "peak_mu_reserved", "{:.4f}"),
             col("bytes copied", "bytes_copied", "{:,}"),
             Column("energy/token uJ", lambda r: (r.get("energy_per_token_joules") or 0) * 1e6, "{:.3g}")),
    judge=_judge, draw=_draw)

"""MoE routing at the published models' widths (mapping/models.py) for the moe workload on sn40l.

The routes are drawn (Zipf popularity, exponent 0.5, Gumbel-top-k) at the models' expert counts,
top-k and widths: no routing recorded from these models ships with rdasim (docs/traces.md says how
to convert one), so "as published" holds for the widths, not for the routes."""

from __future__ import annotations

from cluster.evaluate.study import Row

SWITCH_BASE = {"experts": 128, "top_k": 1, "hidden": 768, "expert_ffn": 3072}  # Fedus et al., JMLR 2022, Table 9


def widths(model: str) -> dict:
    """The moe workload's experts, top_k, hidden and expert_ffn of a model preset (or Switch-Base-128)."""
    if model == "switch-base-128":
        return dict(SWITCH_BASE)
    from mapping.models import model_preset

    m = model_preset(model)
    return {"experts": m.experts, "top_k": m.top_k, "hidden": m.hidden, "expert_ffn": m.expert_ffn}


def point(model: str, steps: int, tokens: int, **memory) -> dict:
    """A point of the moe workload at ``model``'s widths on sn40l, with these memory settings."""
    w = widths(model)
    out = {"chip.preset": "sn40l", "workload.moe.steps": steps, "workload.moe.tokens": tokens,
           "workload.moe.skew": 0.5, "workload.moe.expert_cus": 4, "memory.block_bytes": "4KiB"}
    out.update({f"workload.moe.{k}": v for k, v in w.items()})
    out.update({f"memory.{k}": v for k, v in memory.items()})
    return out


def model_of(r: Row) -> str:
    """Which model's widths a row ran at."""
    for name in ("mixtral-8x7b", "qwen3-30b-a3b", "switch-base-128"):
        w = widths(name)
        if r.get("workload_moe_experts") == w["experts"] and r.get("workload_moe_hidden") == w["hidden"]:
            return name
    return "?"

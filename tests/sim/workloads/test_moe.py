"""moe: routing known answers, shared references and per-expert buffers sized at run time."""

import numpy as np
import pytest

from sim.workloads.moe import route
from tests.sim.chip.chiprun import run


def test_route_gives_distinct_experts_and_skew_favours_the_first():
    r = route(3, 0, 4000, 8, 2, 1.5)
    assert r.shape == (4000, 2) and (r[:, 0] != r[:, 1]).all()
    counts = np.bincount(r.ravel(), minlength=8)
    assert counts.argmax() == 0 and counts[0] > 2 * counts[7]
    flat = np.bincount(route(3, 0, 4000, 8, 2, 0.0).ravel(), minlength=8)
    assert flat.min() > 0.8 * flat.max()  # skew 0: uniform
    assert (route(3, 1, 4000, 8, 2, 1.5) != r).any()  # every step routes afresh


MOE = {"memory": {"reclaim": "partial-free"},
       "workload": {"kind": "moe", "moe": {"steps": 3, "tokens": 10, "experts": 4, "top_k": 2, "producers": 2,
                                           "hidden": 128, "expert_ffn": 64}}}


def test_every_token_reaches_its_experts_and_everything_is_freed():
    done = run(MOE)
    s, t = done.summary, done.tables
    assert s["completed"] and s["requests"] == 3 and s["tokens"] == 30 and s["token_unit"] == "routed tokens"
    assert s["messages"]["reference"] == 3 * 10 * 2
    b = t["buffers"]
    labels = np.array(b["label"])
    assert (labels == "activation").sum() == 30
    # an expert's input buffer holds exactly the tokens routed to it this step
    n = [np.bincount(route(1, step, 10, 4, 2, 0.0).ravel(), minlength=4) for step in range(3)]
    sizes = sorted(int(p) for p, lab in zip(b["peak_bytes"], labels) if lab == "expert-input")
    assert sizes == sorted(int(c) * 256 for step in n for c in step if c)
    assert s["leaks"] == 0 and s["use_after_free"] == 0


def test_gated_counting_pays_synchronisation_that_weights_avoid():
    weights = run(MOE).summary
    gated = run({**MOE, "memory": {"reclaim": "refcount-gated"}}).summary
    copies = 3 * 10 * 2
    assert gated["messages"]["ref_inc"] == copies and gated["sync_messages"] == 2 * copies
    assert weights["sync_messages"] == 0 and weights["messages"]["weight_return"] == copies + 30
    assert gated["sync_wait_cycles"] > 0 == weights["sync_wait_cycles"]
    assert gated["latency_mean_cycles"] > weights["latency_mean_cycles"]


def _fu_ops(tables: dict) -> int:
    e = tables["energy"]
    return next(n for c, a, n in zip(e["component"], e["action"], e["count"]) if (c, a) == ("cu", "fu_op"))


def test_the_same_flops_cost_the_same_energy_however_many_cus_share_them():
    """Every routed token costs its expert 4 x hidden x expert_ffn FLOP, one FMA (2 FLOP) a
    functional-unit op: 30 tokens x top-2 x 4 x 64 x 72 / 2 fu_ops whether the FFN runs on one
    CU or is spread over 6 (a token's FLOPs, 18,432, are a whole number of 6-CU cycles of a
    plasticine CU's 192 FLOP, so no cycle is rounded up); only the compute time shrinks."""
    flops = 3 * 10 * 2 * 4 * 64 * 72
    runs = {}
    for cus in (1, 6):
        moe = {**MOE["workload"]["moe"], "hidden": 64, "expert_ffn": 72, "expert_cus": cus}
        runs[cus] = run({**MOE, "workload": {"kind": "moe", "moe": moe}})
    for r in runs.values():
        assert r.summary["completed"] and r.summary["tokens"] == 30
        assert _fu_ops(r.tables) == flops // 2
    assert runs[6].summary["energy_cu_joules"] == runs[1].summary["energy_cu_joules"] > 0
    assert runs[6].summary["compute_cycles"] * 6 == runs[1].summary["compute_cycles"]


def _tiny(on_oom: str, mu_bytes: str = "8KiB") -> dict:
    """64 tokens a step, each routed to both of 2 experts: every expert's input buffer is
    exactly 64 x 128 x 2 B = 16,384 B, twice what an 8 KiB MU holds."""
    return {"chip": {"preset": "plasticine", "rows": 4, "cols": 8, "mu_bytes": mu_bytes},
            "memory": {"policy": "virtual", "block_bytes": "1KiB", "reclaim": "partial-free", "on_oom": on_oom},
            "workload": {"kind": "moe", "moe": {"steps": 2, "tokens": 64, "experts": 2, "top_k": 2, "producers": 4,
                                                "hidden": 128, "expert_ffn": 64}}}


@pytest.mark.parametrize("on_oom", ["stall", "evict", "fail"])
def test_a_buffer_larger_than_any_mu_is_refused_not_stalled_forever(on_oom):
    s = run(_tiny(on_oom)).summary
    assert (s["status"], s["completed"], s["requests_failed"]) == ("failed", True, 2)
    assert s["oom_failures"] == 2 * 2 and s["stalled_at_end"] == 0  # both experts of both steps
    assert "expert-input buffer of 16,384 B" in s["status_detail"]
    assert "larger than an MU can hold (8,192 B under policy virtual)" in s["status_detail"]
    assert s["use_after_free"] == s["premature_free"] == s["leaks"] == 0


def test_a_buffer_that_just_fits_is_served():
    s = run(_tiny("stall", "16KiB")).summary
    assert (s["status"], s["requests_failed"], s["oom_failures"]) == ("completed", 0, 0)

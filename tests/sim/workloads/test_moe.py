"""moe: routing known answers, shared references and per-expert buffers sized at run time."""

import numpy as np

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
    s, t, _, _ = run(MOE)
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
    weights = run(MOE)[0]
    gated = run({**MOE, "memory": {"reclaim": "refcount-gated"}})[0]
    copies = 3 * 10 * 2
    assert gated["messages"]["ref_inc"] == copies and gated["sync_messages"] == 2 * copies
    assert weights["sync_messages"] == 0 and weights["messages"]["weight_return"] == copies + 30
    assert gated["sync_wait_cycles"] > 0 == weights["sync_wait_cycles"]
    assert gated["latency_mean_cycles"] > weights["latency_mean_cycles"]

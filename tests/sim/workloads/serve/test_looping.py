"""looping = false: the unlooped baseline of "Kernel Looping" (Koeplinger et al. 2024), a kernel call a
layer. Its anchor is one layer simulated alone (its pipeline filled and drained, nothing of the next
layer streaming under it), each call paying that pass and a synchronisation; the looped step pays the
fill once.

Known answers from anchors with round runs: looped, 2 layers of 4 tiles simulated in 1,000 cycles,
100 cycles an iteration in the steady state, 150 cycles a layer at the roofline; over 32 layers
1,000 + (128 - 8) x 100 = 13,000 cycles, E = 13,000 / 4,800 = 2.708. Unlooped, the layer's 4 tiles
alone in 600 cycles: 32 calls of 600 cycles, E = 600 / 150 = 4.0, plus the synchronisation's cycles
over 150 a layer. And a simulated one: a call is no faster than its layer's roofline nor than the
loop's steady layer (looping only takes work away)."""

from __future__ import annotations

import pytest

from mapping.models import model_preset
from sim.workloads.serve import cache
from sim.workloads.serve.anchors import StepPlanRun
from sim.workloads.serve.costs import CostOptions, StepCosts
from sim.workloads.serve.shapes import StepShape
from tests.sim.chip.chiprun import config

SHAPE = StepShape(1, 16, 16)
RUN = StepPlanRun(SHAPE, tiles=4, cus=8, iterations=8, end=1000, per_iteration=100.0, roofline_layer=150.0,
                  plan_status="optimal", messages=0)
CALL = StepPlanRun(SHAPE, tiles=4, cus=8, iterations=4, end=600, per_iteration=150.0, roofline_layer=150.0,
                   plan_status="optimal", messages=0)  # one layer alone: its 4 tiles once, 600 / 4 a tile


def _efficiency(tmp_path, **options) -> float:
    cfg = config({"chip": {"preset": "sn40l"}, "memory": {"policy": "virtual"},
                  "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}}, "run": {"max_cycles": 10**12}})
    (tmp_path / "anchors").mkdir(exist_ok=True)
    path = str(tmp_path / "anchors")
    costs = StepCosts(cfg, model_preset("llama-3.1-8b"), CostOptions(cache=path, **options))
    anchor = costs.anchor_of(SHAPE)
    run = RUN if costs.options.looping else CALL
    cache._write(path, costs._keys(anchor).plain, cache.entry(run))  # the anchor as the store keeps it
    return costs.efficiency(SHAPE)


def test_a_looped_step_pays_its_pipeline_fill_once(tmp_path):
    assert _efficiency(tmp_path) == pytest.approx(13_000 / 4_800)


def test_a_call_a_layer_pays_it_every_layer_and_the_synchronisation(tmp_path):
    assert _efficiency(tmp_path, looping=False, call_sync_seconds=0.0) == pytest.approx(4.0)
    clock = 1.6e9  # the sn40l's
    sync = _efficiency(tmp_path, looping=False, call_sync_seconds=5e-6)
    assert sync == pytest.approx(4.0 + 5e-6 * clock / 150)


def test_the_keys_reach_the_options():
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA
    from sim.workloads.serve.params import cost_options

    cfg = load(RUN_SCHEMA, raw={"workload": {"kind": "serve", "decode": {"looping": False, "call_sync": "2us"}}})
    o = cost_options(cfg["workload"]["decode"])
    assert o.looping is False and o.call_sync_seconds == pytest.approx(2e-6)


def test_looped_and_unlooped_anchors_are_stored_apart(tmp_path):
    """A run of each kind never takes the other's anchor from a shared step cache."""
    cfg = config({"chip": {"preset": "sn40l"}, "memory": {"policy": "virtual"},
                  "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}}})
    m = model_preset("llama-3.1-8b")
    looped = StepCosts(cfg, m, CostOptions(cache=str(tmp_path)))
    unlooped = StepCosts(cfg, m, CostOptions(cache=str(tmp_path), looping=False))
    assert looped._keys(SHAPE).plain != unlooped._keys(SHAPE).plain


def test_a_simulated_call_is_no_faster_than_its_roofline_or_the_loop():
    """Batch-1 decode of an eighth of Llama-3.1-8B (a socket's slice on sn40l-8) on an 8 x 16 sn40l:
    the layer alone once, against the looped anchor over the model's 32 layers."""
    from sim.workloads.serve.anchors import simulate_anchor

    cfg = config({"chip": {"preset": "sn40l", "rows": 8, "cols": 16}, "memory": {"policy": "virtual"},
                  "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}}, "run": {"max_cycles": 10**12}})
    m = model_preset("llama-3.1-8b").tp_slice(8)
    call = simulate_anchor(cfg, m, SHAPE, layers=1)
    loop = simulate_anchor(cfg, m, SHAPE)
    assert call.iterations == call.tiles == 1 and len(call.ends) == 1
    assert call.cycles_for(32) == pytest.approx(32 * call.end)
    assert call.end >= call.roofline_layer
    assert call.cycles_for(32) >= loop.cycles_for(32)

"""Systems of chips: collectives and pipelines against closed forms; any grouping, any backend."""

import dataclasses
import math

import numpy as np
import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.system import simulate_system
from mapping.systems import CHIPS
from sim.system.programs import PipelineParams


def _config(kind: str, size: int, workload: dict, dims: list | None = None, chips: int | None = None):
    dims = dims or [{"kind": kind, "size": size, "link_bandwidth": "64GB/s", "link_latency": "500ns",
                     "parallelism": "TP"}]
    raw = {"system": {"chips": chips or size, "chip": "SN30", "network": dims}, "workload": workload}
    return system_config(load(RUN_SCHEMA, raw=raw))


CLOCK = 1.25e9  # SN30
SN30_FLOPS = CHIPS["SN30"].peak_flops
BPC = 64e9 / CLOCK  # bytes per cycle of a 64 GB/s link
LAT = round(500e-9 * CLOCK)


def _ser(nbytes):
    return -(-nbytes // BPC)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_ring_all_reduce_takes_2_p_minus_1_steps(p):
    s = 1 << 20
    cfg = _config("r", p, {"kind": "collective", "collective": {"op": "all_reduce", "nbytes": s}})
    summary = simulate_system(cfg).summary
    assert summary["collective_cycles"] == [2 * (p - 1) * (LAT + _ser(s // p))]


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_all_gather_and_reduce_scatter_take_half(op):
    s, p = 3 << 18, 6
    cfg = _config("r", p, {"kind": "collective", "collective": {"op": op, "nbytes": s}})
    summary = simulate_system(cfg).summary
    assert summary["collective_cycles"] == [(p - 1) * (LAT + _ser(s // p))]


def test_all_to_all_on_a_fully_connected_system():
    s, p = 1 << 20, 8
    cfg = _config("fc", p, {"kind": "collective", "collective": {"op": "all_to_all", "nbytes": s}})
    summary = simulate_system(cfg).summary
    # each chip's port sends its p - 1 pieces one after another, the last arrives a latency later
    assert summary["collective_cycles"] == [(p - 1) * _ser(s // p) + LAT]
    assert summary["closed_form_cycles"] == summary["collective_cycles"][0]


def test_a_pipeline_of_p_stages_and_m_micro_batches():
    p, m, t = 4, 10, 100_000
    dims = [{"kind": "r", "size": p, "link_bandwidth": "64GB/s", "link_latency": "500ns", "parallelism": "PP"}]
    cfg = _config("r", p, {"kind": "collective"}, dims=dims)  # a system; the workload is set below
    params = PipelineParams(pp=p, micro_batches=m, stage_seconds=t / CLOCK, activation_bytes=0)
    summary = simulate_system(dataclasses.replace(cfg, workload=params)).summary
    transfer = 1 + LAT  # an empty message still holds its link a cycle
    assert summary["sim_cycles"] == (m + p - 1) * t + (p - 1) * transfer


def test_any_grouping_and_backend_give_the_same_run(ray_session):
    dims = [{"kind": "r", "size": 4, "link_bandwidth": "64GB/s", "parallelism": "TP"},
            {"kind": "sw", "size": 3, "link_bandwidth": "32GB/s", "link_latency": "1us", "parallelism": "PP"}]
    cfg = _config("r", 12, {"kind": "collective", "collective": {"op": "all_reduce", "dim": 1, "nbytes": 300_000,
                                                                 "repeats": 3}}, dims=dims, chips=12)
    one = simulate_system(cfg).summary
    for shards in (2, 3, 5, 12):
        assert simulate_system(cfg, shards=shards).summary["result_hash"] == one["result_hash"]
    assert simulate_system(cfg, shards=3, backend="ray").summary["result_hash"] == one["result_hash"]


def test_the_published_two_stage_pipeline_preset(tmp_path):
    """gpt3-1t-4layer-2pp-sn30 with box chips: DFModel's time per batch, plus the one activation
    transfer of the pipeline's fill that DFModel's bubble factor leaves out."""
    from mapping.presets import preset
    from mapping.solver import solve

    plan = solve(preset("gpt3-1t-4layer-2pp-sn30"))
    p = PipelineParams.from_plan(plan)
    dims = [{"kind": "r", "size": 8, "link_bandwidth": "25GB/s", "parallelism": "TP"},
            {"kind": "r", "size": 2, "link_bandwidth": "25GB/s", "parallelism": "PP"},
            {"kind": "r", "size": 2, "link_bandwidth": "25GB/s", "parallelism": "DP"}]
    cfg = _config("r", 8, {"kind": "collective"}, dims=dims, chips=32)
    summary = simulate_system(dataclasses.replace(cfg, workload=p)).summary
    fill = (p.activation_bytes / 25e9) + 500e-9
    assert summary["seconds_simulated"] == pytest.approx(plan.seconds_per_batch + fill, rel=1e-6)


# ------------------------------------------------------------------ MoE expert parallelism
def _experts(p: int, **keys):
    dims = [{"kind": "fc", "size": p, "link_bandwidth": "64GB/s", "link_latency": "500ns", "parallelism": "TP"}]
    return _config("fc", p, {"kind": "expert-parallel", "experts": {"experts": 8, "tokens": 256, "hidden": 1024,
                                                                   "ffn": 4096, "steps": 3, **keys}}, dims=dims)


def test_every_token_to_every_expert_is_a_balanced_all_to_all_each_way():
    p, tokens, hidden, word = 4, 256, 1024, 2
    summary = simulate_system(_experts(p, top_k=8, skew=0.0)).summary
    piece = tokens * (8 // p) * hidden * word  # a chip's tokens to one peer's experts
    a2a = (p - 1) * _ser(piece) + LAT
    expert = -(-4 * tokens * 8 * hidden * 4096 // int(SN30_FLOPS / CLOCK))
    assert summary["step_cycles"][0] == summary["balanced_step_cycles"] == 2 * a2a + expert
    assert summary["expert_imbalance"] == 1.0
    assert summary["landing_bytes_peak"] == summary["landing_bytes_static"] == p * tokens * 2 * hidden * word


def test_skewed_routing_lands_what_the_draw_routed_and_waits_for_the_hot_chip():
    from sim.workloads.moe import route

    p, seed = 4, 1
    done = simulate_system(_experts(p, top_k=2, skew=1.2))
    summary, tables = done.summary, done.tables
    assert summary["completed"]
    # brute force: every chip's draw of every step, counted per destination chip (2 experts a chip)
    landed = {}
    for r in range(3):
        for c in range(p):
            experts = route(seed, r * p + c, 256, 8, 2, 1.2)
            for dst, n in enumerate(np.bincount(experts.ravel() // 2, minlength=p)):
                landed[dst, r] = landed.get((dst, r), 0) + int(n)
    got = {(c, r): n // (1024 * 2) for c, r, n in zip(tables["steps"]["chip"], tables["steps"]["ident"],
                                                     tables["steps"]["nbytes"])}
    assert got == landed
    assert sum(landed.values()) == 3 * p * 256 * 2  # every token's copies land somewhere
    assert summary["expert_imbalance"] == max(landed.values()) / np.mean(list(landed.values())) > 1.5
    assert min(summary["step_cycles"]) > summary["balanced_step_cycles"]
    assert summary["landing_bytes_peak"] < summary["landing_bytes_static"]


def test_expert_parallel_refuses_experts_that_do_not_spread():
    with pytest.raises(ConfigError, match="workload.experts.experts"):
        _experts(3)


def test_a_training_plan_all_reduces_its_gradients_over_the_dp_group_once_a_batch():
    """TP 2 x DP 2, no PP: the micro-batches back to back, then a ring all-reduce of the stage's
    gradients over the DP pair, 2 (p - 1) (L + S / p / B); DFModel amortises (p - 1) / (p B) per
    byte under its stage time, half the ring's bytes per link and no latency."""
    dims = [{"kind": "r", "size": 2, "link_bandwidth": "64GB/s", "link_latency": "500ns", "parallelism": "TP"},
            {"kind": "r", "size": 2, "link_bandwidth": "25GB/s", "link_latency": "500ns", "parallelism": "DP"}]
    graph = {"kind": "llm", "name": "t", "word": 2,
             "llm": {"hidden": 2048, "heads": 16, "seq": 1024, "layers": 2, "global_batch": 16, "micro_batch": 1,
                     "training": True, "tile_size": 0}}
    cfg = _config("r", 2, {"kind": "pipeline", "pipeline": {"graph": graph, "mapping": {"time_limit": "20s"}}},
                  dims=dims, chips=4)
    w = cfg.workload
    assert (w.tp, w.pp, w.dp) == (2, 1, 2) and w.dp_bytes > 0
    summary = simulate_system(cfg).summary
    stage = math.ceil(w.stage_seconds * CLOCK * (1 - 1e-12))
    bpc = 25e9 / CLOCK
    ring = 2 * (2 - 1) * (LAT + -(-(w.dp_bytes // 2) // bpc))
    assert summary["sim_cycles"] == w.micro_batches * stage + ring
    assert summary["dp_all_reduce_seconds"] == pytest.approx(2 * w.dp_seconds_analytic + 2 * LAT / CLOCK, rel=1e-6)

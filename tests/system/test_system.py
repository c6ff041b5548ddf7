"""Systems of chips: collectives and pipelines against closed forms; any grouping, any backend."""

import dataclasses

import pytest

from cluster.config import load
from cluster.run_config import RUN_SCHEMA, system_config
from cluster.system_job import simulate_system
from sim.system.programs import PipelineParams


def _config(kind: str, size: int, workload: dict, dims: list | None = None, chips: int | None = None):
    dims = dims or [{"kind": kind, "size": size, "link_bandwidth": "64GB/s", "link_latency": "500ns",
                     "parallelism": "TP"}]
    raw = {"system": {"chips": chips or size, "chip": "SN30", "network": dims}, "workload": workload}
    return system_config(load(RUN_SCHEMA, raw=raw))


CLOCK = 1.25e9  # SN30
BPC = 64e9 / CLOCK  # bytes per cycle of a 64 GB/s link
LAT = round(500e-9 * CLOCK)


def _ser(nbytes):
    return -(-nbytes // BPC)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_ring_all_reduce_takes_2_p_minus_1_steps(p):
    s = 1 << 20
    cfg = _config("r", p, {"kind": "collective", "collective": {"op": "all_reduce", "nbytes": s}})
    summary, _, _ = simulate_system(cfg)
    assert summary["collective_cycles"] == [2 * (p - 1) * (LAT + _ser(s // p))]


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_all_gather_and_reduce_scatter_take_half(op):
    s, p = 3 << 18, 6
    cfg = _config("r", p, {"kind": "collective", "collective": {"op": op, "nbytes": s}})
    summary, _, _ = simulate_system(cfg)
    assert summary["collective_cycles"] == [(p - 1) * (LAT + _ser(s // p))]


def test_all_to_all_on_a_fully_connected_system():
    s, p = 1 << 20, 8
    cfg = _config("fc", p, {"kind": "collective", "collective": {"op": "all_to_all", "nbytes": s}})
    summary, _, _ = simulate_system(cfg)
    # each chip's port sends its p - 1 pieces one after another, the last arrives a latency later
    assert summary["collective_cycles"] == [(p - 1) * _ser(s // p) + LAT]
    assert summary["closed_form_cycles"] == summary["collective_cycles"][0]


def test_a_pipeline_of_p_stages_and_m_micro_batches():
    p, m, t = 4, 10, 100_000
    dims = [{"kind": "r", "size": p, "link_bandwidth": "64GB/s", "link_latency": "500ns", "parallelism": "PP"}]
    cfg = _config("r", p, {"kind": "collective"}, dims=dims)  # a system; the workload is set below
    params = PipelineParams(pp=p, micro_batches=m, stage_seconds=t / CLOCK, activation_bytes=0)
    summary, _, _ = simulate_system(dataclasses.replace(cfg, workload=params))
    transfer = 1 + LAT  # an empty message still holds its link a cycle
    assert summary["sim_cycles"] == (m + p - 1) * t + (p - 1) * transfer


def test_any_grouping_and_backend_give_the_same_run(ray_session):
    dims = [{"kind": "r", "size": 4, "link_bandwidth": "64GB/s", "parallelism": "TP"},
            {"kind": "sw", "size": 3, "link_bandwidth": "32GB/s", "link_latency": "1us", "parallelism": "PP"}]
    cfg = _config("r", 12, {"kind": "collective", "collective": {"op": "all_reduce", "dim": 1, "nbytes": 300_000,
                                                                 "repeats": 3}}, dims=dims, chips=12)
    one, _, _ = simulate_system(cfg)
    for shards in (2, 3, 5, 12):
        assert simulate_system(cfg, shards=shards)[0]["result_hash"] == one["result_hash"]
    assert simulate_system(cfg, shards=3, backend="ray")[0]["result_hash"] == one["result_hash"]


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
    summary, _, _ = simulate_system(dataclasses.replace(cfg, workload=p))
    fill = (p.activation_bytes / 25e9) + 500e-9
    assert summary["seconds_simulated"] == pytest.approx(plan.seconds_per_batch + fill, rel=1e-6)

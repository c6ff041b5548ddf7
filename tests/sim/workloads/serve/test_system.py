"""serve-system: a model served by a tensor-parallel group of sockets (box chips) reports the
serving metrics, and its chips as shards give the same run in one process, in two and on Ray."""

from __future__ import annotations

import pytest

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.system import simulate_system
from mapping.models import model_preset

RING = {"kind": "r", "size": 2, "link_bandwidth": "100GB/s", "link_latency": "500ns", "parallelism": "TP"}


def raw(chips: int = 2, model: str = "llama-3.1-8b", requests: int = 2) -> dict:
    return {"chip": {"preset": "sn40l", "rows": 8, "cols": 16},  # the socket whose grid prices a chip's step
            "system": {"chips": chips, "chip": "sn40l", "max_seconds": 100.0,
                       "network": [{**RING, "size": chips}]},
            "workload": {"kind": "serve-system", "decode": {
                "model": model, "requests": requests, "prompt_tokens": {"dist": "fixed", "mean": 16},
                "output_tokens": {"dist": "fixed", "mean": 3}, "step_anchor_ratio": 1e9,
                "step_context_ratio": 1e9}}}


def run(config: dict, **kw):
    return simulate_system(system_config(load(RUN_SCHEMA, raw=config)), **kw)


def test_the_megatron_slice():
    """Llama-3.1-70B over 8 chips: 8 of the 64 query heads, one of the 8 KV heads, 1/8 of the MLP
    and the vocabulary a chip; over 16 chips a KV head is kept by two chips."""
    m = model_preset("llama-3.1-70b")
    s8, s16 = m.tp_slice(8), m.tp_slice(16)
    assert (s8.heads, s8.kv_heads, s8.ffn, s8.vocab) == (8, 1, 3584, 16032)
    assert s16.kv_heads == 1 and s16.heads == 4
    assert s8.layer_params * 8 == pytest.approx(m.layer_params, rel=0.001)  # the norms are replicated
    with pytest.raises(ValueError, match="not divisible"):
        m.tp_slice(3)


def test_a_group_serves_and_reports_the_serving_metrics():
    done = run(raw())
    s = done.summary
    assert s["status"] == "completed" and s["requests_finished"] == 2 and s["tokens"] == 6
    assert s["ttft_p50_seconds"] > 0 and s["tbt_p99_seconds"] > 0 and s["e2e_p99_seconds"] > s["ttft_p99_seconds"]
    assert s["serve_steps"] == 3  # both prompts in one prefill step, then two decode steps of both
    # a step's every layer all-reduces twice: 2 (p - 1) chunks a chip each time, plus the commands
    assert s["messages_total"] == 3 * 32 * 2 * 2 * 2 + 3 + 1


def test_chips_as_shards_give_the_same_run(ray_session):
    """One process, a shard a chip in this process and on Ray: the commands and every all-reduce
    chunk cross the shards."""
    one = run(raw()).summary
    two = run(raw(), shards=2).summary
    ray = run(raw(), shards=2, backend="ray").summary
    assert one["result_hash"] == two["result_hash"] == ray["result_hash"]
    assert one["sim_cycles"] == two["sim_cycles"] == ray["sim_cycles"]

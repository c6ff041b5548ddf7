"""KV reserved ahead as the pre-paging servers did (vLLM's Orca baselines) against paged blocks.

Llama-3.1-8B's KV is 2 (K and V) x 32 layers x 8 KV heads x 128 (head_dim) x 2 B = 131,072 B a
token (meta-llama/Llama-3.1-8B config.json: num_hidden_layers 32, num_key_value_heads 8,
hidden_size 4096 / num_attention_heads 32 = 128), so sn40l's 2 MiB HBM page holds 16 tokens.
Three requests of 100 prompt tokens and 20 output tokens arrive at once with room for 24 pages
of KV. By hand, what each reservation holds a request to when it is admitted:

- paged: its prompt's ceil(100 / 16) = 7 pages (and it grows to ceil(119 / 16) = 8): all 3 run;
- exact (Orca (Oracle)): 100 + 20 = 120 tokens, 8 pages: 3 x 8 = 24 fit, all 3 run;
- pow2 (Orca (Pow2)): 100 + 32 = 132 tokens, 9 pages: 2 fit (18), the third waits (27 > 24);
- max (Orca (Max)) at max_model_len 256: 16 pages: 1 runs at a time (32 > 24).

Steps are priced at their roofline (``step_roofline``): no anchor is simulated.
"""

from __future__ import annotations

import pytest

from sim.workloads.serve.figures import StepLog
from sim.workloads.serve.reservation import BatchLog, reserved_tokens
from tests.sim.chip.chiprun import run
from tests.sim.workloads.serve.test_scheduler import KV_TOKEN, PAGE, _tight, logged, serve, trace_file

REQUESTS = [(0, 100, 20)] * 3
# reservation -> (largest batch, its pages a request, steps: a prefill and 19 decodes per batch)
BY_HAND = {"paged": (3, 8, 20), "exact": (3, 8, 20), "pow2": (2, 9, 40), "max": (1, 16, 60)}


def reserving(tmp_path, kind: str, rows=REQUESTS, **decode):
    return run(serve(trace_file(tmp_path, rows), chip=_tight(24), memory={"on_oom": "preempt"},
                     kv_reservation=kind, max_model_len=256, step_roofline=True, **decode))


def test_llama_kv_token_is_its_configs_product():
    assert KV_TOKEN == 2 * 32 * 8 * 128 * 2 and PAGE // KV_TOKEN == 16


@pytest.mark.parametrize("kind,prompt,output,want", [
    ("paged", 100, 20, 0), ("exact", 100, 20, 120), ("pow2", 100, 25, 132), ("pow2", 100, 32, 132),
    ("pow2", 100, 33, 164), ("pow2", 7, 1, 8), ("max", 100, 20, 2048)])
def test_reserved_tokens(kind, prompt, output, want):
    """Orca (Pow2) reserves 32 slots for an output of 25 tokens (vLLM paper, section 6.1)."""
    assert reserved_tokens(kind, prompt, output, 2048) == want


@pytest.mark.parametrize("kind", sorted(BY_HAND))
def test_each_reservation_admits_what_fits_by_hand(tmp_path, kind):
    batch, pages, steps = BY_HAND[kind]
    done = reserving(tmp_path, kind)
    s = done.summary
    assert s["status"] == "completed" and s["requests_finished"] == 3 and s["preemptions"] == 0
    assert s["batch_max"] == batch and len(logged(done, StepLog)) == steps
    assert s["kv_reserved_peak_bytes"] == batch * pages * PAGE
    assert s["kv_used_peak_bytes"] == batch * 119 * KV_TOKEN  # 100 prompt and 19 decoded tokens' K and V
    rows = logged(done, BatchLog)
    assert all(r.reserved_bytes >= r.used_bytes > 0 for r in rows)  # reserved never short of what is written


def test_the_more_reserved_the_fewer_tokens_a_second(tmp_path):
    """The vLLM paper's ordering (Figure 13: paged batches most, then Oracle, Pow2, Max) as throughput."""
    rate = {k: reserving(tmp_path, k).summary["tokens_per_second"] for k in ("paged", "exact", "pow2", "max")}
    # paged and exact run the same steps; paged's pages are granted as it grows, a few cycles of messages more
    assert rate["paged"] == pytest.approx(rate["exact"], rel=1e-5) and rate["exact"] > rate["pow2"] > rate["max"]


def test_max_refuses_a_request_longer_than_the_models_length(tmp_path):
    done = reserving(tmp_path, "max", rows=[(0, 200, 57), (0, 100, 20)])  # 257 > max_model_len 256
    s = done.summary
    assert s["requests_failed"] == 1 and s["requests_finished"] == 1


def test_paged_default_keeps_the_recorded_result_hash(tmp_path):
    """test_scheduler's preemption case (four requests of 200 + 40 tokens in 40 pages, recompute),
    whose result_hash was recorded before the reservation existed: unchanged by default and by
    kv_reservation = "paged" named."""
    rows = [(0, 200, 40)] * 4
    for decode in ({}, {"kv_reservation": "paged"}):
        done = run(serve(trace_file(tmp_path, rows), chip=_tight(40),
                         memory={"on_oom": "preempt", "preempt_mode": "recompute"}, **decode))
        assert done.summary["result_hash"] == "686af5acb851975e582f988f30cc084a"


def test_a_bad_reservation_is_refused_by_name(tmp_path):
    from cluster.config.loader import ConfigError

    with pytest.raises(ConfigError, match=r"kv_reservation.*paged.*max.*pow2.*exact"):
        reserving(tmp_path, "buddy")

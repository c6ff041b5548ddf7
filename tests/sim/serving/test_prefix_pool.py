"""Prefix sharing in the serve workload (issue 31 item 1): hits, bytes saved and prefill tokens
skipped against arithmetic from the trace's ``hash_ids`` alone.

The trace is written as Mooncake publishes ``mooncake_trace.jsonl`` (tests/sim/serving/
test_prefix_sharing.py: ``timestamp`` in ms, ``input_length``, ``output_length``, ``hash_ids``,
512-token blocks). Its requests arrive 5 s apart, after the one before has prefilled (a
prefill of 2-4 thousand tokens of Llama-3.1-8B takes 1-3 s on the 8 x 16 chip): a request then
finds exactly the blocks an earlier request's prompt wrote if those are still held, by a
running sequence (long outputs: every request still runs when the last arrives) or by the
prefix cache (``memory.prefix_cache_bytes``); ``ideal`` counts them from the ids.
"""

from __future__ import annotations

import pytest

from sim.serving.metrics import PreemptionLog, RequestLog
from sim.workloads.serve.figures import StepLog
from tests.sim.chip.chiprun import run
from tests.sim.serving.test_prefix_sharing import MOONCAKE, ideal, mooncake_text
from tests.sim.workloads.serve.test_scheduler import KV_TOKEN, logged, serve

HASHES = [h for h, _ in MOONCAKE]
PROMPTS = [n for _, n in MOONCAKE]
BLOCK = 512


def mooncake(tmp_path, output: int, gap_ms: int = 5000) -> str:
    path = tmp_path / "mooncake_trace.jsonl"
    path.write_text(mooncake_text(MOONCAKE, gap_ms=gap_ms, output=output))
    return str(path)


def first_steps(done) -> dict[int, StepLog]:
    """Each request's first prefill step (a request arrives when the chip is idle or decoding)."""
    steps = logged(done, StepLog)
    return {r.request: next(s for s in steps if s.start >= r.admitted and s.prefill_tokens)
            for r in logged(done, RequestLog)}


def test_running_sequences_share_their_prompt_blocks(tmp_path):
    """Every request still runs when the last is admitted: each finds the blocks of every earlier
    prompt, skips their prefill (its first step computes the rest and reads the hit tokens as
    cached keys) and holds them once (kv_bytes_saved: every hit block a copy not made)."""
    done = run(serve(mooncake(tmp_path, output=3000), requests=0))
    s = done.summary
    reqs = logged(done, RequestLog)
    # the premise: each is admitted after the one before made its first token, and before any ends
    assert all(b.admitted > a.token_cycles[0] for a, b in zip(reqs, reqs[1:]))
    assert reqs[-1].admitted < min(r.token_cycles[-1] for r in reqs)
    want = ideal(HASHES, PROMPTS, BLOCK)
    hits = [k for _, k in want]
    assert (s["prefix_blocks"], s["prefix_hit_blocks"]) == (44, 29) == (sum(b for b, _ in want), sum(hits))
    assert s["prefix_hit_rate"] == pytest.approx(29 / 44)
    assert s["prefix_hit_bytes"] == 29 * BLOCK * KV_TOKEN == s["kv_bytes_saved"]
    assert s["prefill_tokens"] == sum(PROMPTS) - 29 * BLOCK  # 25,824 prompt tokens, 14,848 found
    first = first_steps(done)
    for r in reqs:  # its first prefill step: the prompt after its hits, reading them (and the decoders')
        i = r.request
        assert first[i].prefill_tokens == PROMPTS[i] - hits[i] * BLOCK
        decoding = first[i].decode
        assert first[i].kv_read >= hits[i] * BLOCK and (decoding or first[i].kv_read == hits[i] * BLOCK)
    assert s["status"] == "completed" and all(len(r.token_cycles) == 3000 for r in reqs)


@pytest.mark.parametrize("tokens", [0, 1024])
def test_the_prefix_cache_keeps_what_finished_requests_wrote(tmp_path, tokens):
    """Each request finishes before the next arrives: without a cache nothing is found; with one
    holding every block, the hits are ideal's (with blocks of two trace blocks: ideal's groups)."""
    path = mooncake(tmp_path, output=40)
    raw = serve(path, requests=0, prefix_block_tokens=tokens)
    s = run(raw).summary
    assert s["status"] == "completed" and (s["prefix_blocks"], s["prefix_hit_blocks"]) == (44, 0)
    assert s["prefill_tokens"] == sum(PROMPTS)
    raw["memory"]["prefix_cache_bytes"] = "64GiB"
    s = run(raw).summary
    group = max(tokens // BLOCK, 1)
    want = ideal(HASHES, PROMPTS, BLOCK, group)
    hits = sum(k for _, k in want)
    assert s["status"] == "completed"
    assert (s["prefix_blocks"], s["prefix_hit_blocks"]) == (sum(b for b, _ in want), hits)
    assert hits == (29 if group == 1 else 22)  # by hand, in trace blocks: 0, 2, 4, 2, 2, 4, 6, 2 (pairs)
    assert s["prefix_hit_bytes"] == hits * BLOCK * KV_TOKEN and s["kv_bytes_saved"] == 0  # never two at once
    assert s["prefill_tokens"] == sum(PROMPTS) - hits * BLOCK


def test_no_sharing_when_it_is_off(tmp_path):
    raw = serve(mooncake(tmp_path, output=40), requests=0, memory={"prefix_sharing": False,
                                                                 "prefix_cache_bytes": "64GiB"})
    s = run(raw).summary
    assert s["prefix_blocks"] is None and s["prefill_tokens"] == sum(PROMPTS)


@pytest.mark.parametrize("on_oom,mode", [("preempt", "recompute"), ("preempt", "swap"), ("evict", None)])
def test_shared_blocks_under_memory_pressure(tmp_path, on_oom, mode):
    """All eight arrive at once into room for 400 pages of KV (a 512-token block is 32 pages, the
    longest prompt 282): preemption (a swap moves the tail; the blocks stay held), the prefix
    cache giving its room back and the shared blocks go together; every request is served, and
    HBM never holds more than the weights and the room."""
    from tests.sim.workloads.serve.test_scheduler import PAGE, WEIGHTS, _tight

    raw = serve(mooncake(tmp_path, output=200, gap_ms=1), chip=_tight(400), requests=0,
                memory={"on_oom": on_oom, "prefix_cache_bytes": "1GiB", **({"preempt_mode": mode} if mode else {})})
    done = run(raw)
    s = done.summary
    assert s["status"] == "completed" and s["requests_finished"] == 8
    assert all(len(r.token_cycles) == 200 for r in logged(done, RequestLog))
    assert s["prefix_hit_blocks"] > 0 and logged(done, PreemptionLog)
    assert s["hbm_peak_bytes"] <= (-(-WEIGHTS // PAGE) + 400) * PAGE


def test_a_qwen_bailian_shaped_trace_with_a_prefix_cache(tmp_path):
    """Qwen-Bailian's 16-token blocks (one 2 MiB page of Llama-3.1-8B's K/V each): a conversation's
    next turn finds its parent's prompt blocks in the cache, as ``ideal`` counts them."""
    import json

    from tests.sim.serving.test_prefix_sharing import qwen_rows

    rows = qwen_rows()
    path = tmp_path / "qwen_traceA_blksz_16.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = run(serve(str(path), requests=0, memory={"prefix_cache_bytes": "1GiB"})).summary
    want = ideal([r["hash_ids"] for r in rows], [r["input_length"] for r in rows], 16)
    hits = sum(k for _, k in want)
    assert s["status"] == "completed" and s["trace_format"] == "qwen-bailian" and hits > 0
    assert (s["prefix_blocks"], s["prefix_hit_blocks"]) == (sum(b for b, _ in want), hits)
    assert s["prefill_tokens"] == sum(r["input_length"] for r in rows) - 16 * hits

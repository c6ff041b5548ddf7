"""The serve workload's scheduler: steps against closed forms, memory pressure, determinism.

A 8 x 16 SN40L-like chip (64 CUs, HBM and DDR as sn40l's) serves Llama-3.1-8B. Every step is
priced from one anchor (``step_anchor_ratio`` so large that every shape rounds to one token:
one plan simulated per run, which keeps these tests quick); what is checked here is what the
scheduler decides and records, not the anchor's price (test_anchors.py).
"""

from __future__ import annotations

import pytest

from sim.serving.metrics import PreemptionLog, RequestLog
from sim.workloads.serve.figures import AnchorLog, StepLog
from sim.workloads.serve.shapes import StepShape
from tests.sim.chip.chiprun import run

CHIP = {"preset": "sn40l", "rows": 8, "cols": 16}
WEIGHTS = 8_030_261_248 * 2  # Llama-3.1-8B in bf16
STREAMED = (8_030_261_248 - 128256 * 4096 - 65 * 4096) * 2  # a step's: less the embedding table and the norms
PAGE = 2 * 2**20
KV_TOKEN = 131_072  # bytes of K and V a token adds (32 layers x 8 KV heads x 128 x 2 x 2 B)


def serve(trace: str, chip: dict | None = None, memory: dict | None = None, **decode) -> dict:
    return {"chip": chip or CHIP, "memory": {"policy": "virtual", **(memory or {})},
            "workload": {"kind": "serve", "decode": {"trace": trace, "model": "llama-3.1-8b",
                                                     "step_anchor_ratio": 1e9, "step_context_ratio": 1e9,
                                                     **decode}},
            "run": {"max_cycles": 10**12}}


def trace_file(tmp_path, rows: list[tuple[float, int, int]]) -> str:
    path = tmp_path / "trace.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{t},{p},{o}\n" for t, p, o in rows))
    return str(path)


def logged(done, kind):
    return sorted((x for r in done.simulation.outcome.reports for x in r.logged if isinstance(x, kind)),
                  key=lambda x: x.row())


def test_a_lone_request_prefills_then_decodes(tmp_path):
    """One request of 40 prompt tokens and 4 output tokens: a prefill step of 40 tokens (820 causal
    pairs) making the first token, then 3 decode steps over 40, 41, 42 cached tokens; its token
    times are the steps' ends."""
    done = run(serve(trace_file(tmp_path, [(0, 40, 4)])))
    steps = logged(done, StepLog)
    assert [(s.decode, s.prefill_tokens, s.keys, s.kv_read, s.made) for s in steps] == [
        (0, 40, 40 * 41 // 2, 0, 1), (1, 0, 41, 40, 1), (1, 0, 42, 41, 1), (1, 0, 43, 42, 1)]
    [req] = logged(done, RequestLog)
    assert req.token_cycles == tuple(s.end for s in steps) and req.status == "ok"
    assert all(b.start == a.end for a, b in zip(steps, steps[1:]))  # back to back
    assert [s.read_bytes - STREAMED for s in steps] == [  # a token's embedding row and the cached K/V
        40 * 4096 * 2, 4096 * 2 + 40 * KV_TOKEN, 4096 * 2 + 41 * KV_TOKEN, 4096 * 2 + 42 * KV_TOKEN]
    assert [s.written_bytes for s in steps] == [40 * KV_TOKEN, KV_TOKEN, KV_TOKEN, KV_TOKEN]
    assert done.summary["status"] == "completed" and done.summary["requests_finished"] == 1
    [a1, a2] = logged(done, AnchorLog)  # a prefill (nothing cached) and a decode anchor
    assert {(a.tokens, a.kv_read) for a in (a1, a2)} == {(1, 0), (1, 1)}  # every shape rounds to one token


def test_continuous_batching_and_chunked_prefill(tmp_path):
    """A request of 100 prompt tokens prefilled in chunks of 32 while one of 10 tokens, arrived
    first, decodes: decode first, then the chunk, within max_step_tokens."""
    done = run(serve(trace_file(tmp_path, [(0, 10, 6), (0, 100, 2)]), chunk_tokens=32, max_step_tokens=33))
    steps = logged(done, StepLog)
    # step 0: the first prompt (10) and 23 tokens of the second; then a decode and 32 more tokens
    shapes = [(s.decode, s.prefill_tokens) for s in steps[:5]]
    assert shapes == [(0, 33), (1, 32), (1, 32), (1, 13), (2, 0)]
    first = StepShape.of([], [(10, 0, True), (23, 0, False)])
    assert (steps[0].keys, steps[0].kv_read) == (first.keys, first.kv_read)
    second = StepShape.of([10], [(32, 23, False)])
    assert (steps[1].keys, steps[1].kv_read) == (second.keys, second.kv_read)
    reqs = {r.request: r for r in logged(done, RequestLog)}
    assert reqs[1].token_cycles[0] == steps[3].end  # its last chunk made its first token
    assert len(reqs[0].token_cycles) == 6 and len(reqs[1].token_cycles) == 2


def _tight(pages: int) -> dict:
    """sn40l's tiers with room for the weights and ``pages`` pages of KV in HBM."""
    return {**CHIP, "hbm": {"capacity": (-(-WEIGHTS // PAGE) + pages) * PAGE}}


def test_preemption_recomputes_the_latest_admitted(tmp_path):
    """Four requests of 200 prompt tokens (13 pages of KV each) and 40 tokens out, room for 40
    pages: three fit, the fourth waits (memory-aware admission); as they grow past a page the
    latest admitted is preempted (vLLM's victim), recomputed later; all are served."""
    done = run(serve(trace_file(tmp_path, [(0, 200, 40)] * 4), chip=_tight(40),
                     memory={"on_oom": "preempt", "preempt_mode": "recompute"}))
    s = done.summary
    assert s["status"] == "completed" and s["requests_finished"] == 4
    pre = [p for p in logged(done, PreemptionLog)]
    assert pre and all(p.what == "recompute" for p in pre)
    steps = logged(done, StepLog)
    assert max(s.kv_read + s.tokens for s in steps) * KV_TOKEN <= 40 * PAGE  # never more KV than the room
    reqs = logged(done, RequestLog)
    assert all(len(r.token_cycles) == 40 for r in reqs)


def test_swap_moves_the_victims_kv_through_ddr(tmp_path):
    done = run(serve(trace_file(tmp_path, [(0, 200, 40)] * 4), chip=_tight(40),
                     memory={"on_oom": "preempt", "preempt_mode": "swap"}))
    assert done.summary["status"] == "completed"
    kinds = [p.what for p in logged(done, PreemptionLog)]
    assert "swap-out" in kinds and kinds.count("swap-in") == kinds.count("swap-out")
    assert done.summary["ddr_write_bytes"] > 0


THREE = [(0, 80, 20)] * 3  # three prompts of 80 tokens (5 pages of 16 tokens each), 20 tokens out


@pytest.mark.parametrize("on_oom,mode", [("preempt", "swap"), ("preempt", "recompute"), ("evict", "")])
def test_one_preemption_when_two_cannot_grow(tmp_path, on_oom, mode):
    """Three requests of 80 prompt tokens (5 pages each) in 10 pages of KV room. A and B prefill (10 pages);
    C has no room. At their first decode step A and B each need a 6th page and neither gets one: B, the
    later admitted, is preempted, once; A runs to its end (7 pages), then B, then C, all served. Under swap
    B's 80 tokens go to DDR and back, exactly 80 x 131,072 = 10,485,760 B each way; under recompute nothing
    moves and B prefills its prompt and the token it made, 81 tokens. ``evict`` is swap without
    memory-aware admission: C is admitted with no room and given back, which is no preemption (it holds no
    KV it computed: nothing is lost or moved), so evict counts the same one preemption as swap."""
    memory = {"on_oom": on_oom, **({"preempt_mode": mode} if mode else {})}
    done = run(serve(trace_file(tmp_path, THREE), chip=_tight(10), memory=memory))
    s = done.summary
    assert s["requests_finished"] == 3 and s["requests_failed"] == 0
    assert all(len(r.token_cycles) == 20 for r in logged(done, RequestLog))
    swap = on_oom == "evict" or mode == "swap"
    moved = 80 * KV_TOKEN
    pre = logged(done, PreemptionLog)
    assert s["preemptions"] == 1 and s["preempted_requests"] == 1
    assert sorted((p.request, p.what, p.kv_bytes) for p in pre) == (  # recompute: the KV it drops
        [(1, "swap-in", moved), (1, "swap-out", moved)] if swap else [(1, "recompute", moved)])
    assert s["ddr_write_bytes"] == (moved if swap else 0) and s["ddr_read_bytes"] == (moved if swap else 0)
    prefills = sorted(x.prefill_tokens for x in logged(done, StepLog) if x.prefill_tokens)
    assert prefills == ([80, 160] if swap else [80, 81, 160])  # A and B together, C; B again (recompute)


@pytest.mark.parametrize("on_oom", ["evict", "preempt"])
def test_admission_without_the_books_overcommits_a_chunked_prefill(tmp_path, on_oom):
    """Where evict and preempt (swap both) must differ: A (160 prompt tokens: 10 pages) and B (48 tokens:
    3 pages, 40 out) in 12 pages, prefilled in chunks of 32. Memory-aware admission books A's whole prompt,
    so B waits for A's end: no preemption. evict admits both: B prefills (steps 0-1) and decodes beside A's
    chunks until A's last chunk (step 4) finds the 12 pages taken (A 8, B 4): B, the later admitted, is
    swapped out with its 48 + 2 tokens, exactly 50 x 131,072 = 6,553,600 B to DDR and back, once."""
    memory = {"on_oom": on_oom, "preempt_mode": "swap"} if on_oom == "preempt" else {"on_oom": on_oom}
    done = run(serve(trace_file(tmp_path, [(0, 160, 2), (0, 48, 40)]), chip=_tight(12), memory=memory,
                     chunk_tokens=32))
    s = done.summary
    assert s["requests_finished"] == 2
    moves = sorted((p.request, p.what, p.kv_bytes) for p in logged(done, PreemptionLog))
    if on_oom == "preempt":
        assert s["preemptions"] == 0 and moves == [] and s["ddr_write_bytes"] == 0
    else:
        moved = 50 * KV_TOKEN
        assert s["preemptions"] == 1 and moves == [(1, "swap-in", moved), (1, "swap-out", moved)]
        assert s["ddr_write_bytes"] == s["ddr_read_bytes"] == moved


@pytest.mark.parametrize("on_oom", ["evict", "preempt"])
def test_a_request_given_back_counts_the_prefix_it_finds_when_admitted(tmp_path, on_oom):
    """Two Mooncake requests of 1,536 tokens sharing their first two 512-token blocks (ids 0, 1), arriving
    together, in 100 pages: A takes 96 (and a 97th to grow), so B waits for A's end, then finds both
    blocks in the prefix cache (128 MiB: the two blocks of 64 MiB) and prefills only its last 512 tokens:
    2 hit blocks of 4, as every earlier request's blocks are still held (test_prefix_sharing.ideal). evict
    admits B at once with no room and gives it back; the hits it counts are those of the admission that
    holds, not the 0 of the one given back (it once reported 0 hits, and preemptions)."""
    from tests.sim.serving.test_prefix_sharing import ideal, mooncake_text

    rows = [([0, 1, 100], 1536), ([0, 1, 101], 1536)]
    path = tmp_path / "mooncake_trace.jsonl"
    path.write_text(mooncake_text(rows, gap_ms=0, output=2))
    done = run(serve(str(path), chip=_tight(100), memory={"on_oom": on_oom, "prefix_cache_bytes": "128MiB"},
                     requests=0))
    s = done.summary
    assert s["status"] == "completed" and s["requests_finished"] == 2 and s["preemptions"] == 0
    assert [(4 // 2, 0), (2, 2)] == ideal([h for h, _ in rows], [p for _, p in rows], 512)
    assert (s["prefix_blocks"], s["prefix_hit_blocks"]) == (4, 2)
    assert sorted(x.prefill_tokens for x in logged(done, StepLog) if x.prefill_tokens) == [512, 1536]


@pytest.mark.parametrize("on_oom", ["evict", "preempt", "fail"])
def test_a_request_larger_than_the_memory_is_refused_under_any_on_oom(tmp_path, on_oom):
    """A prompt of 200 tokens (13 pages) in 10 pages of room cannot run even alone: refused under every
    on_oom, beside one of 80 tokens that is served; the status says why, naming the on_oom the run had
    (it once said "memory.on_oom = fail" whatever the run's)."""
    done = run(serve(trace_file(tmp_path, [(0, 200, 2), (0, 80, 2)]), chip=_tight(10), memory={"on_oom": on_oom}))
    s = done.summary
    assert (s["status"], s["requests_finished"], s["requests_failed"], s["preemptions"]) == ("failed", 1, 1, 0)
    assert s["status_detail"] == "1 of 2 requests refused for lack of memory " + (
        "(memory.on_oom = fail)" if on_oom == "fail" else
        f"(each more than the memory holds alone; memory.on_oom = {on_oom})")


def test_fail_refuses_what_does_not_fit(tmp_path):
    done = run(serve(trace_file(tmp_path, [(0, 200, 40)] * 4), chip=_tight(40), memory={"on_oom": "fail"}))
    s = done.summary
    assert s["requests_failed"] >= 1 and s["requests_finished"] + s["requests_failed"] == 4


def test_one_shard_or_two(tmp_path):
    """The scheduler and the HBM controller in different shards: the same run."""
    raw = serve(trace_file(tmp_path, [(0, 30, 3), (0.000002, 20, 2)]))
    one, two = run(raw).summary, run(raw, shards=2).summary
    assert one["result_hash"] == two["result_hash"] and one["sim_cycles"] == two["sim_cycles"]


@pytest.mark.parametrize("chip,model,what", [
    ({"preset": "sn40l-like"}, "llama-3.1-8b", "no memory tiers"),
    ({"preset": "sn40l"}, "llama-3.1-70b", "do not fit"),
])
def test_what_cannot_be_served_is_refused(tmp_path, chip, model, what):
    from cluster.config.loader import ConfigError

    with pytest.raises(ConfigError, match=what):
        run({"chip": chip, "workload": {"kind": "serve", "decode": {"model": model}}})


def test_the_public_azure_code_file_at_its_recorded_times():
    """The first minute of AzureLLMInferenceTrace_code.csv as published (its first 64 rows: 63 in
    the minute, the 64th 3 minutes on): every request of the 60 s window served at its recorded
    arrival (speed-up 1), prompts uncapped (up to 7,436 tokens here), the 64th not read."""
    import csv

    from tests.paths import ROOT

    path = ROOT / "tests" / "data" / "traces" / "azure2023-minute" / "AzureLLMInferenceTrace_code.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))[:63]  # 18:17:03.98 to 18:17:43.31; the 64th is at 18:20:07.04
    done = run(serve(str(path), trace_duration="60s", requests=0))
    s = done.summary
    assert s["status"] == "completed" and s["requests_finished"] == len(rows) == s["trace_requests"] == 63
    assert s["trace_capped_prompts"] == 0
    steps = logged(done, StepLog)
    assert sum(x.prefill_tokens for x in steps) == sum(int(r["ContextTokens"]) for r in rows)
    reqs = {r.request: r for r in logged(done, RequestLog)}
    assert [len(reqs[i].token_cycles) for i in range(len(rows))] == [int(r["GeneratedTokens"]) for r in rows]
    assert reqs[12].arrival == round(29.4790690 * 1.6e9)  # 18:17:33.4590290 - 18:17:03.9799600, at 1.6 GHz
    assert reqs[62].arrival == round(39.3275170 * 1.6e9)  # 18:17:43.3074770


def test_a_step_that_cannot_be_priced_is_named_as_the_cause(tmp_path):
    """Under static-single with 4 KiB slots a step's plan does not place on 64 MUs (test_anchors.py):
    every request ends failed, and the status says why (the step's error), not that an MU refused
    memory under memory.on_oom = fail (on_oom here is stall)."""
    done = run(serve(trace_file(tmp_path, [(0, 40, 4), (0.001, 8, 2)]),
                     memory={"policy": "static-single", "static_buffer_bytes": "4KiB", "on_oom": "stall"}))
    s = done.summary
    assert s["status"] == "failed" and s["requests_failed"] == 2
    assert s["step_error"].startswith("llama-3.1-8b: the step of 1 tokens does not fit sn40l under memory.policy = "
                                      "static-single")
    assert s["status_detail"] == f"2 of 2 requests not served: a step could not be priced: {s['step_error']}"
    assert "on_oom" not in s["status_detail"]

"""Prefix sharing from a trace's ``hash_ids`` (issue 27 item 5): known answers.

The traces are written here exactly as Mooncake (``mooncake_trace.jsonl``: keys ``timestamp``
in ms, ``input_length``, ``output_length``, ``hash_ids``, one id per 512-token block) and
Qwen-Bailian (``qwen_traceA_blksz_16.jsonl``: ``chat_id, parent_chat_id, timestamp`` in s,
``input_length, output_length, type, turn, hash_ids``, 16-token blocks) publish theirs
(tests/data/traces/NOTICE.md, docs/traces.md). Their requests arrive far enough apart that
each is admitted after the one before it has written its prompt, and generate long enough
that every one still runs when the last arrives: the blocks a request finds are then exactly
those an earlier request's prompt holds, which ``ideal`` counts from the ``hash_ids`` alone
(a block is the prefix of ids up to it; a prompt of n tokens shares its first (n - 1) // 512
blocks, as vLLM recomputes at least the last prompt token).
"""

import json
from collections import Counter

import numpy as np
import pytest

from cluster.cli import main
from sim.memory import oracle
from tests.paths import EXAMPLES
from tests.sim.chip.chiprun import run

# (hash_ids, input_length): a 3-block system prompt, then conversations of 5 and 7 blocks
MOONCAKE = [([0, 1, 2, 100, 101], 2460), ([0, 1, 2, 3, 4, 102, 103], 3484), ([0, 1, 2, 3, 4, 5, 6, 104, 105], 4508),
            ([0, 1, 2, 106, 107], 2460), ([0, 1, 2, 108, 109], 2460), ([0, 1, 2, 3, 4, 110, 111], 3484),
            ([0, 1, 2, 3, 4, 5, 6, 112, 113], 4508), ([0, 1, 2, 114, 115], 2460)]


def mooncake_text(rows, gap_ms: int = 1000, output: int = 40) -> str:
    return "".join(json.dumps({"timestamp": i * gap_ms, "input_length": n, "output_length": output,
                               "hash_ids": h}) + "\n" for i, (h, n) in enumerate(rows))


def qwen_rows() -> list[dict]:
    """Three conversations of three turns: a turn's prompt is its parent's prompt, output and a new
    message (so it begins with the parent's whole prompt blocks); ids numbered in order of first use."""
    rows, nxt, last = [], 0, {}
    for turn in (1, 2, 3):
        for conv, first in enumerate((150, 90, 260)):
            cid = len(rows)
            if turn == 1:
                n, ids, parent = first, list(range(nxt, nxt + -(-first // 16))), -1
            else:
                p = rows[last[conv]]
                n, keep = p["input_length"] + p["output_length"] + 37 * turn, p["input_length"] // 16
                ids, parent = p["hash_ids"][:keep] + list(range(nxt, nxt + -(-n // 16) - keep)), p["chat_id"]
            nxt = max(nxt, max(ids) + 1)
            rows.append({"chat_id": cid, "parent_chat_id": parent, "timestamp": round(0.6 * cid, 3),
                         "input_length": n, "output_length": 48, "type": "text", "turn": turn, "hash_ids": ids})
            last[conv] = cid
    return rows


def ideal(hashes: list[list[int]], prompts: list[int], block: int, group: int = 1) -> list[tuple[int, int]]:
    """(shareable blocks, hits) per request, in the trace's blocks, when every earlier request's
    blocks are still held: blocks of ``group`` trace blocks, each named by its ids so far."""
    seen, out = set(), []
    for h, p in zip(hashes, prompts):
        n = min(len(h) // group, (p - 1) // (block * group))
        keys = [tuple(h[:group * (j + 1)]) for j in range(n)]
        k = next((j for j, key in enumerate(keys) if key not in seen), n)
        out.append((n * group, k * group))
        seen.update(keys)
    return out


def decode(trace, **memory) -> dict:
    return {"chip": {"preset": "plasticine", "rows": 4, "cols": 8}, "memory": {"reclaim": "refcount-gated", **memory},
            "workload": {"kind": "kv-decode", "decode": {"trace": str(trace), "trace_speedup": 2e5, "requests": 0,
                                                         "max_batch": 8, "layers": 1, "heads": 1, "head_dim": 16,
                                                         "dtype_bytes": 1}}}


@pytest.fixture(scope="module")
def mooncake(tmp_path_factory):
    path = tmp_path_factory.mktemp("mooncake") / "mooncake_trace.jsonl"
    path.write_text(mooncake_text(MOONCAKE))
    return path


@pytest.fixture(scope="module")
def shared(mooncake):
    return run(decode(mooncake))


def _reports(done):
    return done.simulation.outcome.reports


def test_the_hit_rate_is_the_one_hash_ids_give_on_a_mooncake_shaped_trace(shared):
    s = shared.summary
    want = ideal([h for h, _ in MOONCAKE], [n for _, n in MOONCAKE], 512)
    blocks, hits = sum(b for b, _ in want), sum(k for _, k in want)
    assert (blocks, hits) == (44, 29)  # by hand: 4 + 6 + 8 + 4 + 4 + 6 + 8 + 4 blocks; 0, 3, 5, 3, 3, 5, 7, 3 hits
    assert s["completed"] and (s["prefix_blocks"], s["prefix_hit_blocks"]) == (blocks, hits)
    assert s["prefix_hit_rate"] == pytest.approx(29 / 44)
    per_block = 512 * 16 * 2  # a 512-token block's K and V at 16 B a token
    assert s["prefix_hit_bytes"] == hits * per_block
    assert s["kv_bytes_saved"] == hits * per_block  # every sequence still runs when the last is admitted
    assert s["trace_format"] == "mooncake"


@pytest.mark.parametrize("tokens", [0, 64])
def test_the_hit_rate_is_the_one_hash_ids_give_on_a_qwen_bailian_shaped_trace(tmp_path, tokens):
    """A conversation's next turn arrives after its last one has finished: only a prefix cache
    (memory.prefix_cache_bytes) keeps the blocks it would find; with one large enough, every
    block an earlier prompt wrote is found."""
    rows = qwen_rows()
    path = tmp_path / "qwen_traceA_blksz_16.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = decode(path, prefix_cache_bytes="1MiB")
    raw["workload"]["decode"].update(trace_speedup=2e4, prefix_block_tokens=tokens)
    s = run(raw).summary
    group = max(tokens // 16, 1)  # 64-token blocks: four of the trace's
    want = ideal([r["hash_ids"] for r in rows], [r["input_length"] for r in rows], 16, group)
    assert s["completed"] and s["trace_format"] == "qwen-bailian" and s["leaks"] == 0
    assert (s["prefix_blocks"], s["prefix_hit_blocks"]) == (sum(b for b, _ in want), sum(k for _, k in want))
    assert s["prefix_hit_blocks"] > 0 and s["prefix_hit_blocks"] % group == 0
    assert s["prefix_hit_bytes"] == s["prefix_hit_blocks"] * 16 * 16 * 2
    assert s["kv_bytes_saved"] == 0  # no two sequences ran at once with a block in common
    raw["memory"]["prefix_cache_bytes"] = 0  # without the cache, each turn's blocks die with it
    s = run(raw).summary
    assert s["completed"] and s["prefix_hit_blocks"] == 0 and s["prefix_blocks"] == sum(b for b, _ in want)


def lru(hashes: list[list[int]], prompts: list[int], block: int, keep: int) -> list[int]:
    """Hits per request when each runs alone and a cache keeps the ``keep`` blocks released last:
    a request takes the leading blocks it finds out of the cache, writes the others (one the cache
    already holds further on is a copy of its own, let go), and at its end puts back what it held,
    last block first (vLLM's order: a prefix's head is dropped last), the least recently released
    dropped beyond ``keep``."""
    cache: dict[tuple, None] = {}
    out = []
    for h, p in zip(hashes, prompts):
        keys = [tuple(h[:j + 1]) for j in range(min(len(h), (p - 1) // block))]
        k = next((j for j, key in enumerate(keys) if key not in cache), len(keys))
        for key in keys[:k]:
            del cache[key]
        held = keys[:k] + [key for key in keys[k:] if key not in cache]
        out.append(k)
        for key in reversed(held):
            cache[key] = None
        while len(cache) > keep:
            del cache[next(iter(cache))]
    return out


@pytest.mark.parametrize("keep", [0, 25, 40, 1000])
def test_the_prefix_cache_keeps_the_blocks_released_last(tmp_path, keep):
    rows = qwen_rows()
    path = tmp_path / "qwen_traceA_blksz_16.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = decode(path, prefix_cache_bytes=keep * 16 * 16 * 2)  # ``keep`` blocks of 512 B
    raw["workload"]["decode"]["trace_speedup"] = 2e4
    done = run(raw)
    s, req = done.summary, done.tables["requests"]
    assert all(f < a for f, a in zip(req["finished_seconds"], req["arrival_seconds"][1:]))  # one at a time
    hits = lru([r["hash_ids"] for r in rows], [r["input_length"] for r in rows], 16, keep)
    assert s["completed"] and s["prefix_hit_blocks"] == sum(hits) and s["leaks"] == 0
    assert sum(hits) == {0: 0, 25: 4, 40: 29, 1000: 82}[keep]  # a smaller cache finds less


def test_the_prefix_cache_gives_its_room_back_to_admission_only(tmp_path):
    """On 3 KiB MUs the whole cache does not fit beside the sequences: under memory-aware
    admission (on_oom = "preempt") it drops its least recently used blocks for the room and every
    request is served, finding every block; under stall its blocks hold the room and the run
    deadlocks (the cache is not memory the MUs can take back)."""
    rows = qwen_rows()
    path = tmp_path / "qwen_traceA_blksz_16.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = {}
    for oom in ("preempt", "stall"):
        raw = decode(path, prefix_cache_bytes="1MiB", on_oom=oom, block_bytes=256)
        raw["chip"]["mu_bytes"] = 3072
        raw["workload"]["decode"]["trace_speedup"] = 2e4
        got[oom] = run(raw).summary
    assert got["preempt"]["completed"] and got["preempt"]["prefix_hit_blocks"] == 82
    assert got["stall"]["status"] == "deadlocked" and got["stall"]["requests_finished"] < len(rows)


def test_a_shared_block_is_freed_by_its_last_holders_drop(shared):
    """Every prefix buffer is copied once to the scheduler's index and once to each sequence that
    finds it, dropped once by each holder, and freed by the protocol after the last drop."""
    lab = shared.tables["buffers"]
    prefix = {a for a, label in zip(lab["alloc"], lab["label"]) if label == "kv-prefix"}
    freed_by = Counter(h for a, h in zip(lab["alloc"], lab["freed_by"]) if a in prefix)
    log = oracle.merge_logs([r.oracle_log for r in _reports(shared)])
    copies: Counter = Counter()
    for a in prefix:
        ev = log[log[:, 5] == a]
        kinds = ev[:, 4].tolist()
        assert kinds[0] == oracle.ALLOC and kinds[-1] == oracle.FREE and kinds.count(oracle.FREE) == 1
        assert kinds.count(oracle.DROP) == kinds.count(oracle.COPY) + 1
        assert ev[-1, 0] >= ev[np.array(kinds) == oracle.DROP, 0].max()
        copies[kinds.count(oracle.COPY)] += 1
    # a block written by one request and found by k later ones: 1 + k copies, for each of its 2 buffers
    found = Counter()
    for i, (h, n) in enumerate(MOONCAKE):
        for j in range((n - 1) // 512):
            if not any(g[:j + 1] == h[:j + 1] and (m - 1) // 512 > j for g, m in MOONCAKE[:i]):
                found[1 + sum(g[:j + 1] == h[:j + 1] and (m - 1) // 512 > j for g, m in MOONCAKE[i + 1:])] += 2
    assert copies == found and sum(found.values()) == 2 * (44 - 29)
    assert freed_by == {"refcount": 2 * 15}
    s = shared.summary
    assert (s["use_after_free"], s["double_free"], s["premature_free"], s["leaks"], s["live_at_end"]) == (0,) * 5


def test_a_hit_saves_the_prefill_writes_of_the_hit_blocks(mooncake, shared):
    """The same requests without sharing read the same bytes and write the hit blocks' KV more."""
    alone = run(decode(mooncake, prefix_sharing=False))
    a, s = alone.summary, shared.summary

    def count(tables, action):
        e = tables["energy"]
        return next(n for c, x, n in zip(e["component"], e["action"], e["count"]) if (c, x) == ("mu", action))

    assert a["tokens"] == s["tokens"] and a["completed"]
    assert count(alone.tables, "write_byte") - count(shared.tables, "write_byte") == s["prefix_hit_bytes"]
    assert count(alone.tables, "read_byte") == count(shared.tables, "read_byte")
    assert a["prefix_hit_blocks"] is None and a["kv_bytes_saved"] is None


def test_without_sharing_a_trace_with_hash_ids_runs_as_one_without(mooncake, tmp_path):
    azure = tmp_path / "same.csv"  # the same requests, TIMESTAMP in seconds, no blocks
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"{i},{n},40\n" for i, (_, n) in enumerate(MOONCAKE)))
    off = run(decode(mooncake, prefix_sharing=False)).summary
    assert off["result_hash"] == run(decode(azure)).summary["result_hash"]
    assert off["result_hash"] != run(decode(mooncake)).summary["result_hash"]


@pytest.mark.parametrize("reclaim", ["refcount", "refcount-gated", "partial-free"])
def test_each_protocol_carries_the_shared_references_in_its_own_messages(mooncake, reclaim):
    """Copies: each written block's 2 buffers to the index, each hit's 2 to its sequence: 2 x 44.
    Drops: every copy, and each writer's own reference: 2 x (44 + 15)."""
    done = run(decode(mooncake, reclaim=reclaim))
    s = done.summary
    msgs = s["messages"]
    assert s["completed"] and s["prefix_hit_blocks"] == 29 and s["premature_free"] == 0
    assert msgs["reference"] == 2 * 44 + 0 and s["sync_wait_cycles"] >= 0
    if reclaim == "partial-free":
        assert (msgs["ref_inc"], msgs["ref_dec"], msgs["weight_return"]) == (0, 0, 2 * (44 + 15))
    else:
        assert (msgs["ref_inc"], msgs["ref_dec"], msgs["weight_return"]) == (2 * 44, 2 * (44 + 15), 0)
    sync = {"refcount": 2 * 44, "refcount-gated": 2 * 2 * 44, "partial-free": 2 * msgs["weight_request"]}
    assert s["sync_messages"] == sync[reclaim]  # +1s (and their acknowledgements); weight requests and grants


def test_under_plain_refcount_a_minus_one_overtaking_a_plus_one_frees_a_shared_block_early(mooncake):
    """The proposal's race on a trace: messages entering the network up to 1,000 cycles late
    (noc.jitter) let a -1 reach a block's MU before the +1 of the copy it follows; plain
    refcount frees a block still referenced (the oracle sees it), the gated count and
    partial-free never do."""
    got = {}
    for reclaim in ("refcount", "refcount-gated", "partial-free"):
        raw = decode(mooncake, reclaim=reclaim)
        raw["noc"] = {"jitter": 1000}
        got[reclaim] = run(raw).summary
    assert all(s["completed"] for s in got.values())
    assert got["refcount"]["premature_free"] >= 1 and got["refcount"]["use_after_free"] >= 1
    for safe in ("refcount-gated", "partial-free"):
        s = got[safe]
        assert (s["premature_free"], s["use_after_free"], s["double_free"], s["leaks"]) == (0, 0, 0, 0)


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_a_preempted_sharer_drops_its_blocks_and_finds_them_again(tmp_path, mode):
    """Six requests sharing three blocks outgrow 4 KiB MUs: sequences are preempted; each drops
    its shared blocks (still held by the others) and, admitted again, finds them."""
    rows = [([0, 1, 2, 100 + i], 3 * 512 + 300) for i in range(6)]
    path = tmp_path / "mooncake_trace.jsonl"
    path.write_text(mooncake_text(rows, gap_ms=100, output=300))
    raw = decode(path, on_oom="preempt", preempt_mode=mode, policy="virtual", block_bytes=256)
    raw["chip"]["mu_bytes"] = 4096
    raw["workload"]["decode"].update(head_dim=4, max_batch=6)
    done = run(raw)
    s = done.summary
    assert s["completed"] and s["preemptions"] > 0 and s["requests_finished"] == 6
    assert (s["use_after_free"], s["premature_free"], s["double_free"], s["leaks"]) == (0, 0, 0, 0)
    assert s["prefix_hit_blocks"] > 0


def test_an_evicted_shared_block_is_read_from_dram_by_its_sharers_and_freed_by_its_last(tmp_path):
    """memory.on_oom = "evict": a shared block is a buffer like any other; evicted, its sharers
    read it from DRAM through its MU, and the protocol frees it (in DRAM) at the last drop."""
    rows = [([0, 1, 2, 100 + i], 3 * 512 + 300) for i in range(6)]
    path = tmp_path / "mooncake_trace.jsonl"
    path.write_text(mooncake_text(rows, gap_ms=100, output=300))
    raw = decode(path, on_oom="evict", reclaim="partial-free", policy="virtual", block_bytes=256,
                 placement="spread")
    raw["chip"]["mu_bytes"] = 4096
    raw["workload"]["decode"].update(head_dim=4, max_batch=6)
    done = run(raw)
    s, b = done.summary, done.tables["buffers"]
    assert s["completed"] and s["evictions"] > 0 and s["prefix_hit_blocks"] > 0
    assert (s["use_after_free"], s["premature_free"], s["double_free"], s["leaks"]) == (0, 0, 0, 0)
    assert {h for lab, h in zip(b["label"], b["freed_by"]) if lab == "kv-prefix"} == {"weight"}


def test_one_result_for_any_shard_count(mooncake):
    raw = decode(mooncake, reclaim="partial-free")
    assert run(raw).summary["result_hash"] == run(raw, shards=2, cut="cols").summary["result_hash"]


def test_a_block_size_that_is_not_the_traces_multiple_is_refused(mooncake, capsys):
    assert main(["run", str(EXAMPLES / "kv_decode_trace.toml"), "--quiet", "--set", f"workload.decode.trace={mooncake}",
                 "--set", "workload.decode.trace_start=0s", "--set", "workload.decode.prefix_block_tokens=600"]) == 2
    err = capsys.readouterr().err
    assert "workload.decode.prefix_block_tokens: 600 is not a multiple of the trace's 512-token blocks (mooncake)" \
        in err


def test_the_benchmark_runs_and_prints_its_figures():
    import subprocess
    import sys

    from tests.paths import ROOT

    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "prefix_sharing.py"), "--quick"], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=600).stdout
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["case"] for x in lines] == ["no sharing", "refcount-gated"]
    keys = {"prefix_hit_blocks", "kv_bytes_saved", "ideal_hit_blocks", "peak_mu_utilization", "messages"}
    assert keys <= set(lines[1])
    assert lines[1]["status"] == "completed" and lines[0]["prefix_blocks"] is None

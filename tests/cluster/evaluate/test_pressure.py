"""The memory-pressure study's regime at real scale (Llama-3.1-8B on sn40l, HBM cut to 17 GB, the Azure
2023 code trace's first 10 s): its closed forms against hand arithmetic, and the scheduler's behaviour there
replayed with every step at its roofline (the planning pass's pricing: under a CPU second, no anchors), so
what on_oom serves is checked without the minutes of anchors the study's runs take."""

from __future__ import annotations

import collections
import copy
import tomllib
from dataclasses import replace

import pytest

from cluster.config import load
from cluster.config.loader import set_path
from cluster.config.run import RUN_SCHEMA, chip_config
from cluster.evaluate.spec import base_path
from cluster.evaluate.studies import pressure
from cluster.evaluate.studies.pressure import HBM_BYTES, TRACE, never_fit, room_tokens, window


def test_room_is_the_hbm_pages_left_by_the_weights():
    # 17e9 B / 2 MiB = 8,106 whole pages; the weights, 16,060,522,496 B, take ceil(7,658.3) = 7,659;
    # 447 pages of 2 MiB hold 16 tokens of 128 KiB each: 7,152 tokens
    assert room_tokens() == 7152
    base = tomllib.loads(base_path(pressure.STUDY.base).read_text())
    assert base["chip"]["hbm"]["capacity"] == HBM_BYTES


def test_the_quick_window_has_two_requests_that_never_fit():
    # the trace's first 10 s: 12 requests, two of them with prompts of 7,433 and 7,427 tokens (14 and 8 made),
    # beyond the 7,152-token room; every other prompt and output is under 5,000 tokens
    reqs = window(10)
    assert len(reqs) == 12
    assert sorted(q.prompt for q in reqs if q.prompt > 7152) == [7427, 7433]
    assert never_fit(reqs) == 2
    assert never_fit(reqs, hbm=64 * 10**9) == 0


def _run(on_oom: str, mode: str = "", seconds: int = 10):
    """The study's point (on_oom, preempt mode) replayed with every step at its roofline: its batcher and
    its shard (records and logs) once the run stops."""
    from sim.chip.shard import ChipShard
    from sim.noc.topology import Region
    from sim.workloads.serve.scheduler import Serving

    raw = tomllib.loads(base_path(pressure.STUDY.base).read_text())
    raw = copy.deepcopy(raw)
    for path, value in {"workload.decode.trace": str(TRACE), "workload.decode.trace_duration": f"{seconds}s",
                        "memory.on_oom": on_oom, **({"memory.preempt_mode": mode} if mode else {})}.items():
        set_path(raw, path, value)
    cfg = chip_config(load(RUN_SCHEMA, raw=raw))
    p = cfg.workload
    cfg = replace(cfg, workload=replace(p, costs=replace(p.costs, roofline_only=True)))
    prog = Serving(cfg.workload, cfg)
    shard = ChipShard(cfg, Region(0, cfg.spec.rows, 0, cfg.spec.cols), prog)
    shard.advance(0, cfg.max_cycles)
    return prog.batcher, shard


def _replay(on_oom: str, mode: str = "", seconds: int = 10) -> collections.Counter:
    """How the replayed point's requests end, and whether any is still waiting or running when it stops."""
    batcher, shard = _run(on_oom, mode, seconds)
    ends = collections.Counter(r.status for r in shard.records)
    ends["left"] = len(batcher.waiting) + len(batcher.running)
    return ends


def _logged(shard, kind) -> list:
    return [x for x in shard.logged if isinstance(x, kind)]


def test_preempt_refuses_exactly_the_requests_that_cannot_fit_alone():
    ends = _replay("preempt", "recompute")
    assert ends["failed"] == 2 and ends["ok"] == 10 and ends["left"] == 0


def test_fail_ends_every_request_of_the_full_window():
    # under fail a sequence refused room ends failed; once every running one has, the waiting are admitted
    # (a run used to stop there: 13 served, 5 failed, 45 never admitted); those that can never fit fail too
    ends, n = _replay("fail", seconds=60), len(window(60))
    assert ends["left"] == 0 and ends["ok"] + ends["failed"] == n and ends["failed"] >= never_fit(window(60))


def test_stall_deadlocks_serving_fewer_than_preempt():
    # a sequence whose KV cannot grow sits its step out; once every running one does, nothing can go on
    ends = _replay("stall")
    assert ends["left"] > 0 and ends["ok"] < 10


@pytest.mark.slow  # minutes of anchors (priced once into DIR/anchors); benchmarks/evaluation.py runs it in --quick
def test_memory_pressure_quick_holds_its_references(tmp_path):
    import json

    from cluster.cli import main

    assert main(["evaluate", "--quick", "--in-process", "--quiet", "--only", "memory-pressure",
                 "--out", str(tmp_path)]) == 0
    checks = json.loads((tmp_path / "evaluation.json").read_text())["checks"]["memory-pressure"]
    by = {c["what"]: c for c in checks}
    assert by["preempt refuses exactly the requests that cannot fit alone and serves the rest"]["holds"]
    assert next(c for w, c in by.items() if w.startswith("stall deadlocks"))["holds"]


KV_PAGE_TOKENS = 16  # a 2 MiB page holds 16 tokens of 128 KiB


@pytest.fixture(scope="module")
def minute():
    """The full window (60 s, 63 requests) replayed under evict, preempt-recompute and preempt-swap."""
    return {case: _run(*case, seconds=60) for case in (("evict", ""), ("preempt", "recompute"), ("preempt", "swap"))}


def test_no_running_sequence_ever_lacks_room_to_grow_in_the_minute(minute):
    """Why preempt never preempts here, recompute or swap: at every step the running sequences' KV at
    their last tokens (prompt + output - 1 tokens each, in pages) fits the 447 pages of room together. The
    code trace's outputs are short (6 to 142 tokens: at most 8 pages of growth a request) beside its
    prompts (up to 7,436 tokens), so a head that waits for room leaves more free than the running
    sequences will ever add; no sequence is refused room to grow, and on_oom is consulted only for a
    head that has no room (refused if it cannot fit alone)."""
    from sim.serving.metrics import PreemptionLog, RequestLog
    from sim.workloads.serve.figures import StepLog

    room = room_tokens() // KV_PAGE_TOKENS
    for case, (_, shard) in minute.items():
        assert not _logged(shard, PreemptionLog), case
        served = [r for r in _logged(shard, RequestLog) if r.status == "ok"]
        assert len(served) == 58
        lengths = {r.request: r.prompt + len(r.token_cycles) - 1 for r in served}
        steps = _logged(shard, StepLog)
        need = [sum(-(-lengths[r.request] // KV_PAGE_TOKENS) for r in served
                    if r.admitted <= s.start and r.token_cycles[-1] >= s.end) for s in steps]
        assert len(need) == 842 and max(need) <= room, case


def test_evict_runs_the_steps_preempt_runs(minute):
    """evict is swap without memory-aware admission: it admits a waiting head that has no room, whose
    prompt's pages are refused, and gives it back before any step (it holds no KV of its own: nothing is
    lost or moved, so it is no preemption; the study's full run once counted 241 such give-backs as
    preemptions). So evict runs the same steps as preempt and serves the same requests, refusing the 5
    that cannot fit alone. With no preemption the preempt modes never act: recompute and swap are the
    same run, token for token."""
    from sim.serving.metrics import RequestLog
    from sim.workloads.serve.figures import StepLog

    def steps(case):
        return [(s.decode, s.prefill_tokens) for s in _logged(minute[case][1], StepLog)]

    def ends(case):
        return {r.request: (r.status, len(r.token_cycles)) for r in _logged(minute[case][1], RequestLog)}

    def tokens(case):
        return {r.request: r.token_cycles for r in _logged(minute[case][1], RequestLog)}

    evict, recompute, swap = ("evict", ""), ("preempt", "recompute"), ("preempt", "swap")
    assert steps(evict) == steps(recompute) == steps(swap)
    assert ends(evict) == ends(recompute)
    assert sum(1 for status, _ in ends(evict).values() if status == "failed") == never_fit(window(60)) == 5
    assert tokens(recompute) == tokens(swap)

"""A sweep's shared anchor store (``[sweep] step_cache``): the serve points that name no step cache
run with the sweep's, so an anchor is simulated once per sweep, not once per point.

Known answers: memory.on_oom is consulted only when an MU runs out of memory, which no anchor of
this small trace does (sim/workloads/serve/cache.py), so the second of two points differing only
in on_oom takes every anchor from the store; where anchors come from is how a point ran, not what
it simulated, so the spec's hash, the points' ids and their result hashes are those of the same
sweep without a store.
"""

from __future__ import annotations

import textwrap

from cluster.sweep.dataset import read_dataset
from cluster.sweep.plan import plan_sweep
from cluster.sweep.runner import run_sweep
from tests.sim.workloads.serve.test_scheduler import trace_file

ROWS = [(0.0, 40, 4), (0.0, 300, 3)]


def _spec(tmp_path, name: str, store: str) -> str:
    trace = trace_file(tmp_path, ROWS)
    cache = f'step_cache = "{store}"\n' if store else ""
    return textwrap.dedent(f"""
        [sweep]
        name = "{name}"
        command = "run"
        """) + cache + textwrap.dedent(f"""
        [base.chip]
        preset = "sn40l"
        rows = 8
        cols = 16
        [base.memory]
        policy = "virtual"
        [base.workload]
        kind = "serve"
        [base.workload.decode]
        trace = "{trace}"
        model = "llama-3.1-8b"
        [base.run]
        max_cycles = 1000000000000
        [axes]
        memory.on_oom = ["stall", "evict"]
        """)


def _rows(out, name):
    return sorted(read_dataset(out / name).to_pylist(), key=lambda r: r["memory_on_oom"])


def test_points_of_a_sweep_share_its_anchor_store(tmp_path):
    shared, plain = plan_sweep(_spec(tmp_path, "shared", "anchors")), plan_sweep(_spec(tmp_path, "plain", ""))
    assert shared.spec_hash != "" and [p.id for p in shared.points] == [p.id for p in plain.points]
    out = tmp_path / "out"
    run_sweep(shared, out, quiet=True, in_process=True, compact="never")
    evict, stall = _rows(out, "shared")  # run in spec order: stall first, cold
    assert stall["anchors"] > 0 and stall["anchors_cached"] == 0
    assert evict["anchors_cached"] == evict["anchors"] == stall["anchors"]
    assert len(list((out / "anchors").glob("*.json"))) == stall["anchors"]
    run_sweep(plain, out, quiet=True, in_process=True, compact="never")
    assert [r["result_hash"] for r in _rows(out, "plain")] == [evict["result_hash"], stall["result_hash"]]
    assert all(r["anchors_cached"] == 0 for r in _rows(out, "plain"))

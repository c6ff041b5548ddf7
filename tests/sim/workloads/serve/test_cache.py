"""The anchor store (sim/workloads/serve/cache.py): its key complete and minimal, each anchor
simulated once by concurrent processes, and once across a process killed mid-simulation.

Known answers: every input that can change an anchor's cycles changes its key (the chip, its
NoC and memory, the seed, the model, the options, the shape, the simulator's source), on_oom
does not (it acts only when an MU runs out of memory); two processes needing one anchor run
its simulation once; many processes adding anchors at once lose none; a process killed while
it simulates leaves no entry and no lock behind.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import replace

from mapping.models import model_preset
from sim.workloads.serve import cache
from sim.workloads.serve.anchors import StepPlanRun
from sim.workloads.serve.costs import DEPTH, CostOptions
from sim.workloads.serve.shapes import StepShape
from tests.sim.chip.chiprun import config

SHAPE = StepShape(1, 300, 300)
OPTIONS = CostOptions()


def _cfg(memory: dict, chip: dict | None = None, seed: int = 1):
    return config({"chip": chip or {"preset": "sn40l", "rows": 8, "cols": 16}, "memory": memory,
                   "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}},
                   "run": {"max_cycles": 10**12, "seed": seed}})


def _key(cfg, model="llama-3.1-8b", options=OPTIONS, shape=SHAPE, depth=DEPTH, oom=False):
    return cache.key(cfg, model_preset(model), options, shape, depth, oom)


def test_every_input_that_matters_changes_the_key_and_on_oom_does_not():
    base = _cfg({"policy": "virtual"})
    k = _key(base)
    changed = [_key(_cfg({"policy": "static-multi", "buffers_per_mu": 4})),
               _key(_cfg({"policy": "virtual", "reclaim": "partial-free"})),
               _key(_cfg({"policy": "virtual"}, {"preset": "sn40l", "rows": 8, "cols": 8})),
               _key(_cfg({"policy": "virtual"}, seed=2)),
               _key(replace(base, network="cycle")), _key(replace(base, jitter=3)),
               _key(base, model="llama-3.1-70b"), _key(base, options=CostOptions(tiles=16)),
               _key(base, options=CostOptions(stream_bytes=1 << 15)), _key(base, options=CostOptions(map_seconds=5)),
               _key(base, shape=StepShape(1, 600, 600)), _key(base, depth=(*DEPTH[:-1], 512))]
    assert len({k, *changed}) == 1 + len(changed)
    # memory.on_oom and preempt_mode: the same plain key, and a key with them apart
    for oom in ("fail", "evict", "preempt"):
        other = _cfg({"policy": "virtual", "on_oom": oom})
        assert _key(other) == k and _key(other, oom=True) != _key(base, oom=True)
    # what a decode run's sequences or the run's records need: not in the key
    for field, value in (("admit_watermark", 0.25), ("sample_cycles", 77), ("prefix_sharing", False),
                         ("max_cycles", 5), ("trace", True)):
        assert _key(replace(base, **{field: value})) == k, field


def test_the_simulators_source_is_in_the_key(tmp_path):
    """An edit to the simulator under the same package version: another source hash."""
    (tmp_path / "sim").mkdir()
    f = tmp_path / "sim" / "unit.py"
    f.write_text("X = 1\n")
    before = cache.sources_hash(tmp_path, ("sim",))
    f.write_text("X = 2\n")
    assert cache.sources_hash(tmp_path, ("sim",)) != before


def _run(end: int) -> StepPlanRun:
    return StepPlanRun(SHAPE, 1, 10, 6, end, 100.0, 90.0, "optimal", 5)


def _slow(log: str, end: int, seconds: float) -> StepPlanRun:
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return _run(end)


def _need(root: str, k: str, log: str, out: str) -> None:
    got, hit = cache.once(root, k, k + "-oom", lambda: _slow(log, 123, 1.0))
    with open(out, "a") as f:
        f.write(f"{got.end} {hit}\n")


def test_two_processes_needing_one_anchor_simulate_it_once(tmp_path):
    root, log, out = str(tmp_path / "store"), str(tmp_path / "log"), str(tmp_path / "out")
    ctx = multiprocessing.get_context("fork")
    ps = [ctx.Process(target=_need, args=(root, "a" * 32, log, out)) for _ in range(3)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(30)
    assert len(open(log).read().split()) == 1  # one simulation
    assert sorted(open(out).read().splitlines()) == ["123 False", "123 True", "123 True"]


def _many(root: str, first: int) -> None:
    for i in range(first, first + 25):
        cache.once(root, f"{i:032d}", f"{i:032d}-oom", lambda i=i: _run(i))


def test_processes_adding_anchors_at_once_lose_none(tmp_path):
    root = str(tmp_path / "store")
    ctx = multiprocessing.get_context("fork")
    ps = [ctx.Process(target=_many, args=(root, 25 * j)) for j in range(4)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(30)
    assert cache.stored(root) == 100
    assert all(cache.find(root, f"{i:032d}", "")["end"] == i for i in range(100))


def test_a_process_killed_while_it_simulates_leaves_it_to_simulate_once_more(tmp_path):
    root, log = str(tmp_path / "store"), str(tmp_path / "log")
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=lambda: cache.once(root, "k" * 32, "", lambda: _slow(log, 1, 600)))
    p.start()
    for _ in range(300):
        if os.path.exists(log):
            break
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.join(10)
    assert cache.find(root, "k" * 32, "") is None  # killed mid-simulation: nothing stored
    got, hit = cache.once(root, "k" * 32, "", lambda: _slow(log, 7, 0))  # the lock went with the process
    assert (got.end, hit) == (7, False)
    assert cache.once(root, "k" * 32, "", lambda: _slow(log, 8, 0))[0].end == 7  # stored: not again
    assert len(open(log).read().split()) == 2


def test_an_anchor_that_ran_out_of_memory_is_kept_under_its_on_oom(tmp_path):
    root = str(tmp_path / "store")
    run = replace(_run(5), oom_events=3)
    assert cache.once(root, "p" * 32, "s" * 32, lambda: run)[1] is False
    assert cache.find(root, "p" * 32, "s" * 32)["end"] == 5
    assert cache.find(root, "p" * 32, "f" * 32) is None  # another on_oom: simulated for itself
    assert cache.stored(root) == 1


def test_an_entry_keeps_the_anchors_memory_and_an_older_format_is_simulated_again(tmp_path):
    """An anchor's MU and tier figures come back from the store as stored; an entry written before
    the store kept them (format 5) is never read as one without them: it is simulated again."""
    import json

    from sim.workloads.serve.anchors import PlanMemory

    root = str(tmp_path / "store")
    mem = PlanMemory(0.25, 0.125, 0.5, 0.2, 1_000_000, 7)
    run, hit = cache.once(root, "b" * 32, "b" * 32 + "-oom", lambda: replace(_run(9), memory=mem))
    assert not hit and cache.run_of(cache.find(root, "b" * 32, "")).memory == mem
    old = {k: v for k, v in cache.entry(_run(11)).items() if k != "memory"}
    (tmp_path / "store" / f"{'c' * 32}.json").write_text(json.dumps({"format": 5, **old}))
    assert cache.find(root, "c" * 32, "") is None
    got, hit = cache.once(root, "c" * 32, "c" * 32 + "-oom", lambda: replace(_run(12), memory=mem))
    assert not hit and got.end == 12 and cache.find(root, "c" * 32, "")["memory"]["tier_flows"] == 7

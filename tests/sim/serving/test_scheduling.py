"""The serving scheduler interface: every registered scheduler is one (the Protocol, checked at
run time), and a hand-made trace stepped through each gives the step records worked out by hand.

Each run is traced (its schedulers then keep their step records) and simulated in one shard in
this process, so the scheduler itself can be looked at after the run.
"""

from __future__ import annotations

import pytest

from sim.chip.shard import ChipShard
from sim.noc.topology import Region
from sim.serving.metrics import SERVED
from sim.serving.scheduling import SCHEDULERS
from sim.serving.scheduling.interface import Scheduler
from sim.serving.scheduling.output import SchedulerOutput
from sim.workloads.serve.figures import StepLog
from tests.sim.chip.chiprun import config

KV_TOKEN = 131_072  # Llama-3.1-8B: bytes of K and V a token adds (32 layers x 8 KV heads x 128 x 2 x 2 B)
PAGE = 2 * 2**20  # sn40l's HBM page


def trace_file(tmp_path, rows: list[tuple[int, int]]) -> str:
    """Requests all arriving at 0 with these (prompt, output) tokens."""
    path = tmp_path / "trace.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"0,{p},{o}\n" for p, o in rows))
    return str(path)


def slot(tmp_path) -> dict:
    """The toy on a 4 x 8 chip with one worker slot: prompts of 8 and 9 tokens, 3 and 2 out."""
    return {"workload": {"kind": "kv-decode", "decode": {"trace": trace_file(tmp_path, [(8, 3), (9, 2)]),
                                                         "max_batch": 1, "layers": 1, "heads": 1, "head_dim": 64}}}


def continuous(tmp_path) -> dict:
    """Llama-3.1-8B on an 8 x 16 sn40l, one sequence at a time: prompts of 40 and 30 tokens, 3 and 2
    out (every step priced from one anchor, as tests/sim/workloads/serve/test_scheduler.py)."""
    return {"chip": {"preset": "sn40l", "rows": 8, "cols": 16}, "memory": {"policy": "virtual"},
            "workload": {"kind": "serve", "decode": {"trace": trace_file(tmp_path, [(40, 3), (30, 2)]),
                                                     "model": "llama-3.1-8b", "max_sequences": 1,
                                                     "step_anchor_ratio": 1e9, "step_context_ratio": 1e9}},
            "run": {"max_cycles": 10**12}}


def pages(tokens: int) -> int:
    return -(-tokens * KV_TOKEN // PAGE)


# (step, decode, prefill, made, KV pages granted, ended), worked out by hand:
# the toy prefills on admission (its record lists the admission with the next step), the first token
# made by the prefill, one a step after; one slot, so request 1 waits for request 0 to end
SLOT = [(0, (0,), {0: 8}, 1, {}, {}),
        (1, (0,), {}, 1, {}, {0: SERVED}),
        (2, (1,), {1: 9}, 1, {}, {1: SERVED})]
# the batcher prefills in a step (the first token), then decodes; a prompt's pages are granted when
# its prefill is planned (40 tokens: 3 pages of 2 MiB, room for 48 tokens: its decode needs no more)
CONTINUOUS = [(0, (), {0: 40}, 1, {0: pages(40)}, {}),
              (1, (0,), {}, 1, {}, {}),
              (2, (0,), {}, 1, {}, {0: SERVED}),
              (3, (), {1: 30}, 1, {1: pages(30)}, {}),
              (4, (1,), {}, 1, {}, {1: SERVED})]
SCENARIOS = {"slot": (slot, SLOT), "continuous": (continuous, CONTINUOUS)}


def run_traced(raw: dict):
    """The run's program and its one shard, after the run."""
    cfg = config(raw, trace=True)
    prog = cfg.workload.program(cfg)
    shard = ChipShard(cfg, Region(0, cfg.spec.rows, 0, cfg.spec.cols), prog)
    shard.advance(0, cfg.max_cycles)
    return prog, shard


def scheduler_of(prog, shard):
    """The scheduler instance the run's program started."""
    if hasattr(prog, "batcher"):
        return prog.batcher
    return shard.units[prog.scheduler].state["scheduler"]


def test_every_registered_scheduler_has_a_scenario():
    assert set(SCHEDULERS.names()) == set(SCENARIOS)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_registered_scheduler_is_a_scheduler(name):
    assert issubclass(SCHEDULERS.get(name), Scheduler)


def test_a_class_without_the_steps_is_not_a_scheduler():
    class Loop:
        def run(self):
            yield from ()

    assert not issubclass(Loop, Scheduler)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_two_requests_step_first_come_first_served(tmp_path, name):
    raw, want = SCENARIOS[name]
    prog, shard = run_traced(raw(tmp_path))
    sched = scheduler_of(prog, shard)
    assert isinstance(sched, Scheduler) and isinstance(sched, SCHEDULERS.get(name))
    assert not sched.has_unfinished()
    steps = [x for x in shard.logged if isinstance(x, SchedulerOutput)]
    got = [(s.step, s.decode, s.prefill, s.made, s.kv_granted, s.ended) for s in steps]
    assert got == want
    assert all(not s.preempted for s in steps)
    assert all(a.end <= b.start and s.start < s.end for a, b in zip(steps, steps[1:]) for s in (a, b))
    served = [r for s in steps for r in s.ended]
    assert served == [0, 1]  # first come, first served


def test_the_batchers_records_agree_with_its_step_logs(tmp_path):
    """The step records against serve's own per-step log (a record kept apart): the same tokens."""
    prog, shard = run_traced(continuous(tmp_path))
    steps = [x for x in shard.logged if isinstance(x, SchedulerOutput)]
    logs = sorted((x for x in shard.logged if isinstance(x, StepLog)), key=lambda x: x.step)
    assert [(len(s.decode), sum(s.prefill.values()), s.tokens, s.made, s.start, s.end) for s in steps] == \
        [(x.decode, x.prefill_tokens, x.tokens, x.made, x.start, x.end) for x in logs]


def test_the_records_count_what_a_step_computes():
    out = SchedulerOutput(3, 10, 20, (4, 5), {6: 7, 4: 2}, decode_tokens=2, kv_granted={6: 1}, ended={5: SERVED})
    assert out.scheduled == {4: 4, 5: 2, 6: 7} and out.tokens == 13


def test_the_continuous_scheduler_on_a_socket_groups_books():
    """serve-system (tests/sim/workloads/serve/test_system.py's group of two sockets: two requests of
    16 prompt tokens and 3 out, at once): one prefill step of both, then two decode steps of both; a
    chip's slice keeps 4 of the 8 KV heads, 16 tokens' K and V a page of 2 MiB each. Keeping the
    records does not change the run."""
    from dataclasses import replace

    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, system_config
    from cluster.jobs.system import simulate_system
    from tests.sim.workloads.serve.test_system import raw

    cfg = system_config(load(RUN_SCHEMA, raw=raw()))
    traced = simulate_system(replace(cfg, chip=replace(cfg.chip, trace=True)))
    steps = [x for r in traced.simulation.outcome.reports for x in r.logged if isinstance(x, SchedulerOutput)]
    got = [(s.step, s.decode, s.prefill, s.made, s.kv_granted, s.ended) for s in steps]
    assert got == [(0, (), {0: 16, 1: 16}, 2, {0: 1, 1: 1}, {}),
                   (1, (0, 1), {}, 2, {}, {}),
                   (2, (0, 1), {}, 2, {}, {0: SERVED, 1: SERVED})]
    assert 16 * KV_TOKEN // 2 <= PAGE  # the slice's 16 tokens fit a page
    assert traced.summary["result_hash"] == simulate_system(cfg).summary["result_hash"]

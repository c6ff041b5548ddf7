"""A run's memory is its live state plus a row per request (issue 27 item 8).

Known answers: the state a chip shard holds when its run ends grows by less than 100 bytes
per generated token (tracemalloc, two runs that differ only in their outputs' length: before
issue 27 it was about 7 KB a token, every delivery, memory change and step kept); the figures
folded as the run goes (the MUs' peaks, integrals, first out-of-memory utilisation and
samples) equal those computed from every change, which a traced run still keeps, for one and
two shards; the deliveries' digest does not depend on the order of the rows; the mean and
median window equal numpy's over the list of windows.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.jobs.chip import ChipGrid
from cluster.parallel.epochs import WindowLengths
from cluster.parallel.local import run_local
from sim.chip.digest import Digest, combined
from sim.chip.occupancy import sample_period
from sim.chip.spec import unit_layout
from tests.sim.chip.chiprun import config, run
from tests.sim.memory.test_evict import pressure


def decode(output: int, **run_keys) -> dict:
    """Eight sequences of 64 prompt tokens and ``output`` generated ones, 4 at a time."""
    return {"memory": {"block_bytes": "1KiB"}, "run": run_keys,
            "workload": {"kind": "kv-decode", "decode": {
                "requests": 8, "max_batch": 4, "layers": 1, "heads": 2, "head_dim": 32,
                "prompt_tokens": {"dist": "fixed", "mean": 64}, "output_tokens": {"dist": "fixed", "mean": output}}}}


def retained_at_end(raw: dict) -> tuple[int, int]:
    """(bytes Python holds when the run's last epoch is done and its shard has made its report;
    tokens generated)."""
    grid = ChipGrid(config(raw))
    regions = grid.regions(1, "rows")
    model = grid.model(regions)
    build, held = model.build, []

    def built(region, index):  # a shard whose report, once made, measures what is held
        shard = build(region, index)
        report = shard.report

        def measured():  # the shard and what it hands back, both held
            out = report()
            if not held:
                held.append(tracemalloc.get_traced_memory()[0])
            return out

        shard.report = measured
        return shard

    model.build = built
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = run_local(model, regions, grid.epoch(regions, None)[0])
    finally:
        tracemalloc.stop()
    tokens = sum(rec.tokens for r in out.reports for rec in r.records)
    return held[0] - base, tokens


def test_the_state_a_run_holds_does_not_grow_with_the_tokens_it_generates():
    # one sample of the MUs' bytes (run_mu_series keeps at most 2,000 an MU, however long the run:
    # the next test), so what is measured is what could grow with the tokens
    run(decode(4))  # compile and import everything first
    short, t_short = retained_at_end(decode(32, sample_cycles=10**9))
    long_, t_long = retained_at_end(decode(288, sample_cycles=10**9))
    assert t_long - t_short == 8 * 256
    per_token = (long_ - short) / (t_long - t_short)
    print(f"{per_token:.1f} bytes held per generated token")
    assert per_token < 100, f"{per_token:.0f} bytes held per generated token"


@pytest.mark.parametrize("shards", [1, 2])
def test_the_folded_memory_figures_equal_those_of_every_change(shards):
    raw = pressure(sample_cycles=7)  # over-committed: MUs run out of memory, buffers are evicted
    done = run(raw, shards=shards, trace=True)  # a traced run keeps every change of the MUs' bytes
    s, results, cfg = done.summary, done.simulation.outcome.reports, config(raw)
    assert s["oom_events"] > 0 and s["completed"]
    log = np.concatenate([r.mem_log for r in results])
    log = log[np.argsort(log[:, 0], kind="stable")]
    cyc = log[:, 0]
    last = np.r_[cyc[1:] != cyc[:-1], True]
    used, reserved = np.cumsum(log[:, 2])[last], np.cumsum(log[:, 3])[last]
    cyc = cyc[last]
    end, cap = s["sim_cycles"], len(unit_layout(cfg.spec).mus) * cfg.spec.mu_bytes
    widths = np.diff(np.r_[cyc, end])
    assert s["peak_mu_utilization"] == used.max() / cap
    assert s["peak_mu_reserved"] == reserved.max() / cap
    assert s["mean_mu_utilization"] == float((widths * used).sum()) / (cap * end)
    assert s["fragmentation"] == 1.0 - float((widths * used).sum()) / float((widths * reserved).sum())
    first = min(r.first_oom for r in results if r.first_oom >= 0)
    assert s["first_oom_utilization"] == used[cyc < first][-1] / cap
    # every MU's samples: the bytes after all changes of each sample's cycle
    series = done.tables["mu_series"]
    period = sample_period(7, end)
    assert period > 7 and -(-end // period) <= 2000  # the run is long enough for the period to double
    for mu in (int(unit_layout(cfg.spec).mus[0]), int(log[0, 1])):
        mine = log[log[:, 1] == mu]
        at = np.arange(0, end, period)
        idx = np.searchsorted(mine[:, 0], at, side="right") - 1
        want = np.where(idx >= 0, np.cumsum(mine[:, 2])[np.maximum(idx, 0)], 0) if len(mine) else 0 * at
        sel = np.asarray(series["mu"]) == mu
        assert list(np.asarray(series["cycle"])[sel]) == list(at)
        assert list(np.asarray(series["used_bytes"])[sel]) == list(want)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(*[st.integers(-2**62, 2**62)] * 4), min_size=1, max_size=60), st.integers(1, 59))
def test_the_digest_does_not_depend_on_the_order_or_the_split_of_the_rows(rows, cut):
    one, a, b = Digest(4), Digest(4), Digest(4)
    for r in rows:
        one.add(r)
    for r in reversed(rows[:cut]):
        b.add(r)
    for r in rows[cut:]:
        a.add(r)
    assert combined([one.sealed()]) == combined([a.sealed(), b.sealed()])
    other = Digest(4)
    for r in rows[1:] + [(rows[0][0] + 1, *rows[0][1:])]:
        other.add(r)
    assert combined([other.sealed()]) != combined([one])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=0, max_size=200))
def test_the_window_figures_are_numpys(windows):
    w = WindowLengths()
    for x in windows:
        w.add(x)
    got = w.stats()
    if not windows:
        assert got == (0.0, 0.0)
        return
    a = np.asarray(windows, dtype=np.float64)
    assert got == (round(float(a.mean()), 2), float(np.median(a)))

"""Flows in continuous time: finishes against closed forms, re-rating at starts and ends."""

import math

import pytest

from sim.flows import FlowSet


def test_a_single_stream_finishes_at_bytes_over_its_bottleneck():
    f = FlowSet()
    tier, port = f.resource(1000.0), f.resource(62.0)
    f.advance(100.0)
    f.start("w", 16 * 2**20, (tier, port), now=100.0)
    (done,) = f.advance(1e9)
    assert done.time == pytest.approx(100.0 + 16 * 2**20 / 62.0, rel=1e-12)
    assert done.nbytes == 16 * 2**20


def test_a_late_flow_slows_the_first_then_speeds_up_when_it_ends():
    # 1000 B/cycle shared: a (3000 B) alone for 1 cycle (1000 B), then both at 500 B/cycle;
    # b (1000 B) ends at 1 + 2 = 3 having taken 1000 B; a has 3000 - 1000 - 1000 = 1000 left at
    # full rate: ends at 4
    f = FlowSet()
    r = f.resource(1000.0)
    f.start("a", 3000, (r,), now=0.0)
    assert f.advance(1.0) == []
    f.start("b", 1000, (r,), now=1.0)
    assert f.rates() == {"a": 500.0, "b": 500.0}
    done = f.advance(10.0)
    assert [(d.key, d.time) for d in done] == [("b", 3.0), ("a", 4.0)]
    assert f.moved == pytest.approx(4000.0)


def test_ties_finish_together_in_start_order():
    f = FlowSet()
    r = f.resource(64.0)
    for k in ("c", "a", "b"):
        f.start(k, 6400, (r,), now=0.0)
    done = f.advance(math.inf)
    assert [d.key for d in done] == ["c", "a", "b"]
    assert {d.time for d in done} == {300.0}


def test_work_conserving_on_one_resource():
    """However the flows arrive, a resource kept busy moves its capacity every cycle: the last
    flow ends when all the bytes have gone at full rate (here every start is before that)."""
    f = FlowSet()
    r = f.resource(100.0)
    sizes = [700, 1300, 250, 5000, 40]
    for i, n in enumerate(sizes):
        f.advance(float(i))
        f.start(i, n, (r,), now=float(i))
    done = f.advance(math.inf)
    assert max(d.time for d in done) == pytest.approx(sum(sizes) / 100.0)


def test_bad_calls_are_refused():
    f = FlowSet()
    r = f.resource(10.0)
    f.advance(5.0)
    with pytest.raises(ValueError, match="the set's time is 5.0"):
        f.start("x", 10, (r,), now=1.0)
    with pytest.raises(ValueError, match="at least one byte"):
        f.start("x", 0, (r,), now=5.0)
    with pytest.raises(ValueError, match="does not have"):
        f.start("x", 10, (7,), now=5.0)
    with pytest.raises(ValueError, match="positive capacity"):
        f.resource(0.0)


def test_a_flow_after_another_starts_when_it_finishes():
    # b waits for a: a alone at 100 B/cycle ends at 10, b then alone ends at 10 + 5 = 15;
    # c, independent, shares with a then with b
    f = FlowSet()
    r = f.resource(100.0)
    f.start("a", 1000, (r,), now=0.0)
    f.start("b", 500, (r,), now=0.0, after="a")
    assert f.rates() == {"a": 100.0}
    done = f.advance(100.0)
    assert [(d.key, d.time) for d in done] == [("a", 10.0), ("b", 15.0)]
    f.start("c", 100, (r,), now=100.0, after="b")  # b is done: c starts at once
    assert f.rates() == {"c": 100.0}
    with pytest.raises(ValueError, match="already in the set"):
        f.start("c", 100, (r,), now=100.0)


def test_flows_ending_within_together_end_as_one_group():
    # a and b share 100 B/cycle (50 each): a (1000 B) ends at 20, b (1020 B) at 20.4. Grouped
    # (together = 1), both end at b's instant and report their own; c, alone after them, starts
    # from 20.4 at the full rate. Without grouping b speeds up once a is done (ends at 20.2).
    for together, b_end, c_end in ((1.0, 20.4, 30.4), (0.0, 20.2, 30.2)):
        f = FlowSet(together=together)
        r = f.resource(100.0)
        f.start("a", 1000, (r,), now=0.0)
        f.start("b", 1020, (r,), now=0.0)
        f.start("c", 1000, (r,), now=0.0, after="b")
        done = f.advance(100.0)
        assert [(d.key, round(d.time, 9)) for d in done] == [("a", 20.0), ("b", b_end), ("c", c_end)]

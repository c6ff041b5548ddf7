"""Max-min fair rates against closed forms, a textbook case and the defining property."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.flows import max_min_rates


def _rates(capacity, routes, caps=None):
    pf = [f for f, r in enumerate(routes) for _ in r]
    pr = [x for r in routes for x in r]
    caps = np.full(len(routes), math.inf) if caps is None else np.asarray(caps, dtype=float)
    return max_min_rates(np.asarray(capacity, dtype=float), np.array(pf, dtype=np.int64),
                         np.array(pr, dtype=np.int64), caps)


def test_one_flow_runs_at_its_bottleneck():
    assert _rates([1000.0, 62.0, 500.0], [(0, 1, 2)]).tolist() == [62.0]
    assert _rates([1000.0], [(0,)], [40.0]).tolist() == [40.0]


def test_equal_flows_share_equally():
    assert _rates([1000.0], [(0,)] * 8).tolist() == [125.0] * 8


def test_textbook_case():
    # Bertsekas and Gallager's shape: link B (capacity 1) carries three flows, link A (capacity 1)
    # two of them; B splits 1/3 each, the flow alone on A beyond B takes what A has left (2/3)
    r = _rates([1.0, 1.0], [(0,), (0, 1), (1,), (1,)])
    assert r == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3])


def test_caps_leave_the_rest_to_others():
    # a flow capped at 100 of 1000: the other two share 900
    assert _rates([1000.0], [(0,)] * 3, [100.0, math.inf, math.inf]) == pytest.approx([100.0, 450.0, 450.0])


def test_a_flow_on_nothing_needs_a_cap():
    assert _rates([], [()], [5.0]).tolist() == [5.0]
    with pytest.raises(ValueError, match="finite cap"):
        _rates([], [()])


routes_st = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True), min_size=1, max_size=7)


@settings(max_examples=200, deadline=None)
@given(caps=st.lists(st.floats(1.0, 100.0), min_size=4, max_size=4), routes=routes_st,
       flow_caps=st.lists(st.one_of(st.just(math.inf), st.floats(0.5, 80.0)), min_size=7, max_size=7))
def test_every_flow_has_a_bottleneck(caps, routes, flow_caps):
    """Max-min fairness (Bertsekas and Gallager, Prop. 6.5.1): the rates are feasible and each
    flow is at its cap or crosses a full resource on which no flow is faster than it."""
    flow_caps = flow_caps[:len(routes)]
    r = _rates(caps, routes, flow_caps)
    load = np.zeros(len(caps))
    for f, route in enumerate(routes):
        for x in route:
            load[x] += r[f]
    assert np.all(load <= np.asarray(caps) * (1 + 1e-9))
    for f, route in enumerate(routes):
        if r[f] >= flow_caps[f] * (1 - 1e-9):
            continue
        bottleneck = [x for x in route if load[x] >= caps[x] * (1 - 1e-9)
                      and all(r[g] <= r[f] * (1 + 1e-9) for g, rg in enumerate(routes) if x in rg)]
        assert bottleneck, (f, r, load)


def _textbook(capacity, pf, pr, caps):
    """Progressive filling as array operations, round by round (Bertsekas and Gallager 6.5.2):
    the reference the compiled filling must equal bit for bit."""
    n, m = len(caps), len(capacity)
    rate, left = np.zeros(n), capacity.copy()
    active = caps > 0
    if m:
        active[pf[(left <= 0)[pr]]] = False
    while np.any(active):
        users = np.bincount(pr[active[pf]], minlength=m).astype(float)
        used = users > 0
        step = float(np.min(left[used] / users[used])) if np.any(used) else math.inf
        step = min(step, float(np.min(caps[active] - rate[active])))
        rate[active] += step
        left -= step * users
        done = active & np.isfinite(caps) & (caps - rate <= 1e-12 * np.maximum(caps, 1.0))
        filled = used & (left <= 1e-12 * np.maximum(capacity, 1.0))
        left[filled] = 0.0
        done[pf[filled[pr]]] = True
        active &= ~done
    return rate


@settings(max_examples=300, deadline=None)
@given(caps=st.lists(st.one_of(st.floats(0.1, 100.0), st.sampled_from([0.0, 62.0, 1000.0])), min_size=4, max_size=4),
       routes=routes_st, flow_caps=st.lists(st.one_of(st.just(math.inf), st.floats(0.0, 80.0)), min_size=7, max_size=7))
def test_rates_are_the_textbook_rounds_bit_for_bit(caps, routes, flow_caps):
    """The compiled filling does the rounds' floating-point operations in their order: the same
    rates to the last bit (a simulation's flows finish at the same instants)."""
    pf = np.array([f for f, r in enumerate(routes) for _ in r], dtype=np.int64)
    pr = np.array([x for r in routes for x in r], dtype=np.int64)
    capacity, fc = np.asarray(caps, dtype=float), np.asarray(flow_caps[:len(routes)], dtype=float)
    got = max_min_rates(capacity, pf, pr, fc)
    assert got.tobytes() == _textbook(capacity, pf, pr, fc).tobytes()

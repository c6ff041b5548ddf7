"""Max-min fair rates by progressive filling.

Every unfrozen flow's rate rises at the same pace until a resource it crosses is full or the
flow reaches its own cap; those flows freeze, the others go on (Bertsekas and Gallager, "Data
Networks", 2nd ed., 1992, section 6.5.2). The result is the unique max-min fair allocation:
no flow's rate can grow without lowering the rate of a flow that has no more. A flow's route
is given as pairs (flow, resource), so a flow crosses any number of resources; a flow on no
resource runs at its cap (an unlimited flow on nothing is an error).

The filling is compiled (``_fill``): a memory tier re-rates a thousand flows at every start
and end, and each round's dozen array operations cost more in numpy's calls than in their
work. It does the textbook rounds' floating-point operations in their order (a flow's rate is
the sum of the rounds' steps it took part in, a resource's room its capacity less each
round's step times its users), so its rates are those of the numpy formulation bit for bit
(tests/sim/flows/test_maxmin.py holds that one as the reference).
"""

from __future__ import annotations

import numpy as np

from sim.noc.jit import kernel

EPS = 1e-12  # relative slack under which a resource counts as full and a flow as at its cap
_OK, _NO_PROGRESS, _NO_CAP = 0, 1, 2


def max_min_rates(capacity: np.ndarray, pair_flow: np.ndarray, pair_resource: np.ndarray,
                  caps: np.ndarray) -> np.ndarray:
    """Rates of ``len(caps)`` flows: flow ``pair_flow[i]`` crosses resource ``pair_resource[i]``;
    ``capacity[r]`` is resource r's capacity, ``caps[f]`` flow f's own limit (``inf``: none).
    Capacities and caps are in one unit (bytes per cycle); the rates come in it too."""
    capacity = np.ascontiguousarray(capacity, dtype=float)
    caps = np.ascontiguousarray(caps, dtype=float)
    pf = np.ascontiguousarray(pair_flow, dtype=np.int64)
    pr = np.ascontiguousarray(pair_resource, dtype=np.int64)
    n, m = len(caps), len(capacity)
    rate = np.zeros(n)
    if n == 0:
        return rate
    left = capacity.copy()
    active = np.empty(n, dtype=np.bool_)
    users = np.empty(m, dtype=np.int64)
    full = np.empty(m, dtype=np.bool_)
    why = _fill(capacity, pf, pr, caps, rate, left, active, users, full)
    if why == _NO_CAP:
        raise ValueError("a flow that crosses no resource needs a finite cap")
    if why == _NO_PROGRESS:
        raise RuntimeError("progressive filling made no progress")  # numerical safety: a round must freeze someone
    return rate


@kernel
def _fill(capacity, pf, pr, caps, rate, left, active, users, full):
    """Progressive filling into ``rate`` (zeros; ``left`` a copy of ``capacity``; the other
    arrays scratch of their lengths); _OK, _NO_CAP (a flow on no resource has no cap) or
    _NO_PROGRESS."""
    n, m, npair = caps.shape[0], capacity.shape[0], pf.shape[0]
    for f in range(n):
        active[f] = False
    for p in range(npair):  # active: crossing a resource, for now
        active[pf[p]] = True
    n_active = 0
    for f in range(n):
        if not active[f] and np.isinf(caps[f]):
            return _NO_CAP
        active[f] = caps[f] > 0
    for p in range(npair):  # a flow on a resource of no capacity gets nothing
        if left[pr[p]] <= 0:
            active[pf[p]] = False
    for f in range(n):
        n_active += active[f]
    while n_active:
        for r in range(m):
            users[r] = 0
        for p in range(npair):
            if active[pf[p]]:
                users[pr[p]] += 1
        step = np.inf
        for r in range(m):
            if users[r] > 0:
                s = left[r] / float(users[r])
                if s < step:
                    step = s
        least = np.inf
        for f in range(n):
            if active[f]:
                s = caps[f] - rate[f]
                if s < least:
                    least = s
        if least < step:
            step = least
        for f in range(n):
            if active[f]:
                rate[f] += step
        any_full = False
        for r in range(m):
            left[r] -= step * float(users[r])
            full[r] = users[r] > 0 and left[r] <= EPS * max(capacity[r], 1.0)
            if full[r]:
                left[r] = 0.0
                any_full = True
        froze = 0
        for f in range(n):  # flows at their cap, then every flow crossing a resource now full
            if active[f] and np.isfinite(caps[f]) and caps[f] - rate[f] <= EPS * max(caps[f], 1.0):
                active[f] = False
                froze += 1
        if any_full:
            for p in range(npair):
                f = pf[p]
                if active[f] and full[pr[p]]:
                    active[f] = False
                    froze += 1
        if froze == 0:
            return _NO_PROGRESS
        n_active -= froze
    return _OK

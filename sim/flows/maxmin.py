"""Max-min fair rates by progressive filling.

Every unfrozen flow's rate rises at the same pace until a resource it crosses is full or the
flow reaches its own cap; those flows freeze, the others go on (Bertsekas and Gallager, "Data
Networks", 2nd ed., 1992, section 6.5.2). The result is the unique max-min fair allocation:
no flow's rate can grow without lowering the rate of a flow that has no more. A flow's route
is given as pairs (flow, resource), so a flow crosses any number of resources; a flow on no
resource runs at its cap (an unlimited flow on nothing is an error).
"""

from __future__ import annotations

import numpy as np

EPS = 1e-12  # relative slack under which a resource counts as full and a flow as at its cap


def max_min_rates(capacity: np.ndarray, pair_flow: np.ndarray, pair_resource: np.ndarray,
                  caps: np.ndarray) -> np.ndarray:
    """Rates of ``len(caps)`` flows: flow ``pair_flow[i]`` crosses resource ``pair_resource[i]``;
    ``capacity[r]`` is resource r's capacity, ``caps[f]`` flow f's own limit (``inf``: none).
    Capacities and caps are in one unit (bytes per cycle); the rates come in it too."""
    capacity = np.asarray(capacity, dtype=float)
    caps = np.asarray(caps, dtype=float)
    pf = np.asarray(pair_flow, dtype=np.int64)
    pr = np.asarray(pair_resource, dtype=np.int64)
    n, m = len(caps), len(capacity)
    rate = np.zeros(n)
    if n == 0:
        return rate
    crossed = np.bincount(pf, minlength=n) > 0
    if np.any(~crossed & np.isinf(caps)):
        raise ValueError("a flow that crosses no resource needs a finite cap")
    left = capacity.copy()
    active = caps > 0
    full = left <= 0
    if m and np.any(full):  # a flow on a resource of no capacity gets nothing
        active[pf[full[pr]]] = False
    while np.any(active):
        on = active[pf]
        users = np.bincount(pr[on], minlength=m).astype(float)
        used = users > 0
        step = np.inf
        if np.any(used):
            step = float(np.min(left[used] / users[used]))
        step = min(step, float(np.min(caps[active] - rate[active])))
        rate[active] += step
        left -= step * users
        # freeze flows at their cap, and every flow crossing a resource now full
        capped = active & np.isfinite(caps) & (caps - rate <= EPS * np.maximum(caps, 1.0))
        filled = used & (left <= EPS * np.maximum(capacity, 1.0))
        left[filled] = 0.0
        done = capped.copy()
        if np.any(filled):
            done[pf[filled[pr]]] = True
        if not np.any(done & active):  # numerical safety: the step must freeze someone
            raise RuntimeError("progressive filling made no progress")
        active &= ~done
    return rate

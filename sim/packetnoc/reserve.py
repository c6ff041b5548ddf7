"""First-come-first-served reservations of many resources at once (a max-plus scan).

Items are sorted by resource, then by priority; item ``i`` wants its resource for
``length[i]`` cycles from ``ready[i]`` on. Served in order, item ``i`` starts at
``start_i = max(ready_i, start_{i-1} + length_{i-1})`` (the first item of a resource at
``max(ready, free)``). Unrolled, with ``E_i`` the lengths of the items before ``i`` on
the same resource, ``start_i = E_i + max(free, max_{j<=i} (ready_j - E_j))``: a running
maximum, which numpy computes for every resource in one pass once each resource's
values are lifted above the previous resource's by a constant offset.
"""

from __future__ import annotations

import numpy as np

_LIFT = np.int64(1) << 41  # larger than any (cycle - queued length) difference


def reserve(group: np.ndarray, ready: np.ndarray, length: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Start cycle of each item; ``group`` sorted ascending, ``free`` per item (its resource's
    first free cycle). Returns int64 starts; ``start + length`` of a resource's last item is
    the resource's new first free cycle."""
    n = len(group)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n == 1:
        return np.maximum(ready, free).astype(np.int64)
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(group[1:], group[:-1], out=first[1:])
    if first.all():  # every item alone on its resource
        return np.maximum(ready, free)
    excl = np.cumsum(length) - length
    gid = np.cumsum(first) - 1
    e = excl - excl[first][gid]
    lift = gid * _LIFT
    run = np.maximum.accumulate(ready - e + lift) - lift
    return e + np.maximum(run, free)


def last_of_group(group: np.ndarray) -> np.ndarray:
    """Boolean mask of each group's last item (``group`` sorted)."""
    last = np.empty(len(group), dtype=bool)
    if len(group):
        last[-1] = True
        np.not_equal(group[1:], group[:-1], out=last[:-1])
    return last

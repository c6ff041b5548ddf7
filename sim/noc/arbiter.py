"""Vectorised round-robin arbitration: many independent arbiters resolved at once.

A round-robin arbiter with pointer ``ptr`` over ``size`` requesters grants the first
requester at or after ``ptr`` (cyclically) and then moves its pointer past the winner
(BookSim2's RoundRobinArbiter). Giving each request the key ``(index - ptr) mod size``
turns that into "smallest key wins" within each arbiter, which ``np.minimum.at`` does
for every arbiter of every router in one call.
"""

from __future__ import annotations

import numpy as np

_BIG = np.iinfo(np.int64).max


class GroupArgmin:
    """Winners of many arbiters: for each group id, the request with the smallest key."""

    def __init__(self, groups: int):
        self._best = np.full(groups, _BIG, dtype=np.int64)

    def winners(self, group: np.ndarray, key: np.ndarray, arange: np.ndarray | None = None) -> np.ndarray:
        """Boolean mask over requests: True where the request wins its group.

        Keys need not be unique: ties go to the earlier request in the arrays.
        ``arange`` may pass a cached ``np.arange`` at least ``len(group)`` long.
        """
        n = len(group)
        if n <= 1:
            return np.ones(n, dtype=bool)
        idx = arange[:n] if arange is not None else np.arange(n, dtype=np.int64)
        enc = key * n + idx  # unique, order-preserving
        best = self._best
        best[group] = _BIG
        np.minimum.at(best, group, enc)
        return best[group] == enc


def rr_key(index, pointer, size):
    """Round-robin priority key: 0 for the requester the pointer is at, then 1, 2, ..."""
    return (index - pointer) % size

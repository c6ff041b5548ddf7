"""The wall time a sweep's points would take on W workers, scheduled as the sweep dispatches them.

The runner hands points out in its interleaved order to whichever worker frees first (greedy list
scheduling, Graham 1966: at most (2 - 1/W) times the optimum); studies run one after another,
so the evaluation's wall is the sum of its studies' makespans."""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def makespan(seconds: Sequence[float], workers: int) -> float:
    """Finish time of ``seconds`` (in dispatch order) on ``workers`` workers, each point to the first free."""
    if workers < 1:
        raise ValueError(f"workers = {workers}: must be at least 1")
    free = [0.0] * min(workers, max(len(seconds), 1))
    for s in seconds:
        heapq.heapreplace(free, free[0] + s)
    return max(free)

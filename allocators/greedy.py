"""Size-descending best-fit: TensorFlow Lite's arena planner ("greedy by size").

Buffers live for the whole run come first, then the rest largest first (ties: earlier
start); each goes into the smallest gap, among the already placed buffers live at the
same time, that can hold it, else on top of them all.
"""

from __future__ import annotations

import bisect

from allocators.errors import NoPlacementError
from allocators.lifetimes import Problem
from allocators.placement import UNBOUNDED, gap_starts, slot_of
from allocators.sweep import Sweep


def greedy_by_size(problem: Problem, sw: Sweep) -> list[int]:
    """Offsets (in buffer order) of the size-descending best-fit packing."""
    bufs = problem.buffers
    first = min(b.start for b in bufs) if bufs else 0
    last = max(b.end for b in bufs) if bufs else 0
    # TFLite's order: buffers live for the whole run first, then larger first, then earlier start
    order = sorted(range(len(bufs)), key=lambda i: (
        not (bufs[i].start == first and bufs[i].end == last), -bufs[i].size, bufs[i].start, i))
    offsets = [-1] * len(bufs)
    busy: list[list[tuple[int, int]]] = [[] for _ in bufs]  # per buffer: placed neighbours' ranges
    for i in order:
        slot = slot_of(bufs[i], problem.bank_size)
        best_start, best_gap = UNBOUNDED, UNBOUNDED + 1
        for start, gap in gap_starts(slot, busy[i]):
            if gap < best_gap and start < UNBOUNDED:
                best_start, best_gap = start, gap
        if best_start >= UNBOUNDED:
            raise NoPlacementError(f"buffer {bufs[i].id!r}: no free range in its allowed banks")
        offsets[i] = best_start
        rng = (best_start, best_start + bufs[i].size)
        for j in sw.neighbours[i]:
            bisect.insort(busy[j], rng)
    return offsets

"""Size-descending best-fit: TensorFlow Lite's arena planner ("greedy by size").

Buffers live for the whole run come first, then the rest largest first (ties: earlier
start); each goes into the smallest gap, among the already placed buffers live at the
same time, that can hold it, else on top of them all.

Each placement looks only at the placed buffers whose lifetimes overlap its own: they
are found with numpy over the buffers sorted by start (those starting before it ends),
sorted by address, and the gaps between them measured in one pass, so a buffer costs
O(m log m) array work for the m buffers starting in [its start - the longest lifetime,
its end), not a Python loop over its neighbours. Bank windows (a slot with allowed banks) take the general path.
"""

from __future__ import annotations

import numpy as np

from allocators.errors import NoPlacementError
from allocators.lifetimes import Problem, segments
from allocators.placement import UNBOUNDED, gap_starts, slot_of
from allocators.sweep import Sweep


def _intervals(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner, start, end) of every lifetime segment (a periodic buffer may have two), sorted by start."""
    rows = [(i, lo, hi) for i, b in enumerate(problem.buffers) for lo, hi in segments(b, problem.period)]
    arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
    arr = arr[np.argsort(arr[:, 1], kind="stable")]
    return arr[:, 0], arr[:, 1], arr[:, 2]


def greedy_by_size(problem: Problem, sw: Sweep | None = None, progress=None) -> list[int]:
    """Offsets (in buffer order) of the size-descending best-fit packing (``sw`` is not needed)."""
    bufs = problem.buffers
    n = len(bufs)
    if not n:
        return []
    first = min(b.start for b in bufs)
    last = max(b.end for b in bufs)
    # TFLite's order: buffers live for the whole run first, then larger first, then earlier start
    order = sorted(range(n), key=lambda i: (
        not (bufs[i].start == first and bufs[i].end == last), -bufs[i].size, bufs[i].start, i))
    owner, seg_lo, seg_hi = _intervals(problem)
    longest = int((seg_hi - seg_lo).max())  # a segment overlapping [lo, hi) starts in [lo - longest, hi)
    own_segments = [segments(b, problem.period) for b in bufs]
    size = np.array([b.size for b in bufs], dtype=np.int64)
    offset = np.full(n, -1, dtype=np.int64)
    for step, i in enumerate(order):
        hits = []
        for lo, hi in own_segments[i]:  # placed segments overlapping [lo, hi): they start before hi
            j, k = np.searchsorted(seg_lo, (lo - longest, hi), side="left")
            cand = owner[j:k][seg_hi[j:k] > lo]
            hits.append(cand[offset[cand] >= 0])
        near = np.unique(np.concatenate(hits)) if len(hits) > 1 else hits[0]
        near = near[near != i]
        offset[i] = _best_fit(bufs[i], problem.bank_size, offset[near], offset[near] + size[near])
        if progress is not None and step and step % 5000 == 0:
            progress(f"greedy: {step:,} of {n:,} buffers placed")
    return offset.tolist()


def _best_fit(buf, bank_size, lo: np.ndarray, hi: np.ndarray) -> int:
    """Start of the smallest gap between the busy ranges [lo, hi) that holds ``buf`` (lowest on ties)."""
    slot = slot_of(buf, bank_size)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    if slot.constrained:
        best_start, best_gap = UNBOUNDED, UNBOUNDED + 1
        for start, gap in gap_starts(slot, list(zip(lo.tolist(), hi.tolist()))):
            if gap < best_gap and start < UNBOUNDED:
                best_start, best_gap = start, gap
        if best_start >= UNBOUNDED:
            raise NoPlacementError(f"buffer {buf.id!r}: no free range in its allowed banks")
        return best_start
    a = slot.alignment
    # gap k lies between the highest end among the first k ranges (reach) and range k's start
    reach = np.concatenate(([0], np.maximum.accumulate(hi))) if len(hi) else np.zeros(1, dtype=np.int64)
    start = -(-reach // a) * a
    room = np.concatenate((lo, [UNBOUNDED])) - reach
    fits = np.concatenate((lo, [UNBOUNDED])) - start >= slot.size
    fits[-1] = True  # on top of them all
    candidates = np.flatnonzero(fits)
    best = candidates[np.argmin(room[candidates])]  # smallest gap; argmin takes the lowest on ties
    return int(start[best])

"""Pareto fronts and hypervolume of objective vectors, every objective turned into a minimisation.

``losses`` are (n, d) arrays in which smaller is better in every column (a maximised metric
enters negated: ``as_losses``). The hypervolume is exact for any d by slicing along the last
objective (Zitzler's HSO): the volume is the sum, over the slabs between successive values
of the last objective, of the (d-1)-dimensional hypervolume of the points at or below the
slab times its height; d = 2 is the staircase sum. That costs O(n^(d-1) log n), a few
milliseconds for the hundreds of trials of an exploration with 2 or 3 objectives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MARGIN = 0.1  # the default reference: the worst feasible value plus this share of the objective's range


def as_losses(values: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    """Objective values (n, d) in their own directions -> losses (negate the maximised columns)."""
    sign = np.where(np.asarray(maximize, dtype=bool), -1.0, 1.0)
    return np.asarray(values, dtype=float).reshape(-1, len(sign)) * sign


def dominates(a: np.ndarray, b: np.ndarray) -> bool:
    """Loss vector ``a`` is no worse than ``b`` everywhere and better somewhere."""
    return bool(np.all(a <= b) and np.any(a < b))


def non_dominated(losses: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows no other row dominates (equal rows are all kept)."""
    losses = np.asarray(losses, dtype=float)
    n = len(losses)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        le = np.all(losses <= losses[i], axis=1)
        lt = np.any(losses < losses[i], axis=1)
        keep[i] = not np.any(le & lt)
    return keep


def front_levels(losses: np.ndarray) -> np.ndarray:
    """Non-dominated sorting: level 0 is the front, level 1 the front of the rest, ..."""
    losses = np.asarray(losses, dtype=float)
    level = np.full(len(losses), -1)
    rest = np.arange(len(losses))
    k = 0
    while rest.size:
        mask = non_dominated(losses[rest])
        level[rest[mask]] = k
        rest = rest[~mask]
        k += 1
    return level


def contributions(losses: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Each row's exclusive hypervolume: what the set loses without it (SMS-EMOA's selection measure)."""
    losses = np.asarray(losses, dtype=float)
    total = hypervolume(losses, ref)
    return np.array([total - hypervolume(np.delete(losses, i, axis=0), ref) for i in range(len(losses))])


def reference_point(losses: np.ndarray, margin: float = MARGIN) -> np.ndarray:
    """The worst value of each objective plus ``margin`` of its range (of its size when the range is 0)."""
    losses = np.asarray(losses, dtype=float)
    worst, best = losses.max(axis=0), losses.min(axis=0)
    span = worst - best
    span = np.where(span > 0, span, np.maximum(np.abs(worst), 1.0))
    return worst + margin * span


def _hv2(points: np.ndarray, ref: np.ndarray) -> float:
    """2-D staircase: sort by the first objective, add each point's strip below the best second value so far."""
    order = np.argsort(points[:, 0], kind="stable")
    volume, best = 0.0, ref[1]
    for x, y in points[order]:
        if y < best:
            volume += (ref[0] - x) * (best - y)
            best = y
    return volume


def _hv(points: np.ndarray, ref: np.ndarray) -> float:
    d = points.shape[1]
    if not len(points):
        return 0.0
    if d == 1:
        return float(ref[0] - points[:, 0].min())
    if d == 2:
        return _hv2(points, ref)
    order = np.argsort(points[:, -1], kind="stable")
    pts = points[order]
    volume = 0.0
    for i in range(len(pts)):
        top = pts[i + 1, -1] if i + 1 < len(pts) else ref[-1]
        if top > pts[i, -1]:
            below = pts[: i + 1, :-1]
            volume += _hv(below[non_dominated(below)], ref[:-1]) * (top - pts[i, -1])
    return volume


def hypervolume(losses: np.ndarray, ref: np.ndarray) -> float:
    """Volume dominated by ``losses`` and bounded by ``ref`` (points not strictly better than ``ref`` add nothing)."""
    losses = np.asarray(losses, dtype=float)
    ref = np.asarray(ref, dtype=float)
    if losses.size == 0:
        return 0.0
    losses = losses.reshape(-1, len(ref))
    inside = losses[np.all(losses < ref, axis=1)]
    if not len(inside):
        return 0.0
    return float(_hv(inside[non_dominated(inside)], ref))


def hypervolume_history(losses: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Hypervolume of the first k rows, for every k (the curve of an optimiser against its trials)."""
    losses = np.asarray(losses, dtype=float).reshape(-1, len(ref))
    out = np.zeros(len(losses))
    front = np.empty((0, len(ref)))
    volume = 0.0
    for k, row in enumerate(losses):
        if np.all(row < ref) and not any(np.all(f <= row) for f in front):
            front = np.vstack([front, row])
            front = front[non_dominated(front)]
            volume = hypervolume(front, ref)
        out[k] = volume
    return out

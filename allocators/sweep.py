"""Cross sections of a lifetime problem: the time axis cut at every start and end.

Between two consecutive event times the set of live buffers is constant; that set is a
*section*. The largest section total is the classic lower bound of dynamic storage
allocation (no packing can use fewer bytes than are live at once), and sections are
what the exact search reasons about (MiniMalloc, Moffitt ASPLOS'23, section 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from allocators.lifetimes import Problem, segments


@dataclass(frozen=True)
class Sweep:
    """Per-buffer section ranges, per-section members and the time-overlap graph."""

    times: np.ndarray            # event times; section k is [times[k], times[k+1])
    ranges: tuple[tuple[tuple[int, int], ...], ...]  # per buffer: half-open section ranges
    span: np.ndarray             # (n, 2): first section, last section + 1 (covers all ranges)
    members: tuple[np.ndarray, ...]  # per section: buffers live in it
    totals: np.ndarray           # per section: bytes live

    @cached_property
    def neighbours(self) -> tuple[np.ndarray, ...]:
        """Per buffer: buffers live at a common time (built on first use: O(n x overlap), which
        the greedy planner does without)."""
        n = len(self.ranges)
        flat = [(lo, hi, b) for b, rs in enumerate(self.ranges) for lo, hi in rs]
        r_lo, r_hi, r_buf = (np.array(col, dtype=np.int64) for col in zip(*flat)) if flat else (np.zeros(0, np.int64),) * 3
        return tuple(_overlapping(r_lo, r_hi, r_buf, b, self.ranges[b], n) for b in range(n))

    @property
    def sections(self) -> int:
        return len(self.members)

    @property
    def lower_bound(self) -> int:
        """Maximum bytes live at once: no valid packing has a smaller peak."""
        return int(self.totals.max()) if len(self.totals) else 0


def sweep(problem: Problem) -> Sweep:
    """Cut the time axis at every lifetime boundary and index buffers by section."""
    n = len(problem.buffers)
    segs = [segments(b, problem.period) for b in problem.buffers]
    times = np.unique(np.array([t for s in segs for iv in s for t in iv], dtype=np.int64))
    m = max(len(times) - 1, 0)
    ranges = tuple(
        tuple((int(np.searchsorted(times, lo)), int(np.searchsorted(times, hi))) for lo, hi in s) for s in segs)
    span = np.array([(min(r[0] for r in rs), max(r[1] for r in rs)) for rs in ranges], dtype=np.int64).reshape(n, 2)
    sizes = np.array([b.size for b in problem.buffers], dtype=np.int64)
    flat = [(lo, hi, b) for b, rs in enumerate(ranges) for lo, hi in rs]
    r_lo, r_hi, r_buf = (np.array(col, dtype=np.int64) for col in zip(*flat)) if flat else (np.zeros(0, np.int64),) * 3
    # (section, buffer) membership pairs without an m x n matrix: expand each range
    lengths = r_hi - r_lo
    pair_buf = np.repeat(r_buf, lengths)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    pair_sec = np.repeat(r_lo, lengths) + np.arange(len(pair_buf)) - first
    order = np.lexsort((pair_buf, pair_sec))
    pair_buf, pair_sec = pair_buf[order], pair_sec[order]
    bounds = np.searchsorted(pair_sec, np.arange(m + 1))
    members = tuple(pair_buf[bounds[s]:bounds[s + 1]] for s in range(m))
    totals = np.bincount(pair_sec, weights=sizes[pair_buf], minlength=m).astype(np.int64)[:m]
    return Sweep(times=times, ranges=ranges, span=span, members=members, totals=totals)


def _overlapping(r_lo, r_hi, r_buf, b: int, own: tuple[tuple[int, int], ...], n: int) -> np.ndarray:
    """Buffers sharing a section with buffer b (interval test on section ranges)."""
    hit = np.zeros(n, dtype=bool)
    for lo, hi in own:
        hit[r_buf[(r_lo < hi) & (lo < r_hi)]] = True
    hit[b] = False
    return np.flatnonzero(hit)

"""Brute-force reference models the allocator tests compare against (slow, obviously right)."""

from __future__ import annotations

import itertools


def live_steps(start: int, end: int, period: int | None) -> set[int]:
    """Every integer time step of [start, end), modulo the period when there is one."""
    return {t % period if period else t for t in range(start, end)}


def max_live_bytes(buffers, period=None) -> int:
    """Largest sum of sizes live at one time step."""
    load: dict[int, int] = {}
    for b in buffers:
        for t in live_steps(b.start, b.end, period):
            load[t] = load.get(t, 0) + b.size
    return max(load.values(), default=0)


def overlapping_pairs(buffers, offsets, period=None) -> set[tuple[str, str]]:
    """Pairs live at a common step whose byte ranges intersect, by comparing cells."""
    out = set()
    for a, b in itertools.combinations(buffers, 2):
        if live_steps(a.start, a.end, period) & live_steps(b.start, b.end, period):
            ra = set(range(offsets[a.id], offsets[a.id] + a.size))
            if ra & set(range(offsets[b.id], offsets[b.id] + b.size)):
                out.add(tuple(sorted((a.id, b.id))))
    return out


def optimal_peak(buffers, period=None, align=1) -> int:
    """Smallest peak over every placement on multiples of ``align``: exhaustive depth-first search."""
    steps = [live_steps(b.start, b.end, period) for b in buffers]
    clash = [[bool(steps[i] & steps[j]) for j in range(len(buffers))] for i in range(len(buffers))]
    upper = sum(b.size + max(b.alignment, 1) for b in buffers) + 1  # stacking them all fits below
    best = [upper]
    offsets = [0] * len(buffers)

    def place(i: int, peak: int) -> None:
        if peak >= best[0]:
            return
        if i == len(buffers):
            best[0] = peak
            return
        b = buffers[i]
        for o in range(0, best[0] - b.size, max(b.alignment, 1)):
            if all(not clash[i][j] or o + b.size <= offsets[j] or offsets[j] + buffers[j].size <= o
                   for j in range(i)):
                offsets[i] = o
                place(i + 1, max(peak, o + b.size))

    place(0, 0)
    return best[0]


class MemoryModel:
    """Byte-exact model of one address range: which owner holds each byte."""

    def __init__(self, start: int, end: int):
        self.start, self.end = start, end
        self.owner: dict[int, int] = {}  # block address -> size

    def used(self) -> list[bool]:
        cells = [False] * (self.end - self.start)
        for addr, size in self.owner.items():
            for x in range(addr, addr + size):
                assert not cells[x - self.start], f"byte {x} owned twice"
                cells[x - self.start] = True
        return cells

    def free_runs(self, floor: int) -> list[tuple[int, int]]:
        """Maximal free [start, end) runs at or above ``floor``."""
        cells = self.used()
        runs, run_start = [], None
        for x in range(floor, self.end):
            if not cells[x - self.start]:
                run_start = x if run_start is None else run_start
            elif run_start is not None:
                runs.append((run_start, x))
                run_start = None
        if run_start is not None:
            runs.append((run_start, self.end))
        return runs


def greedy_by_size(buffers, period=None) -> dict[str, int]:
    """TFLite's greedy by size, step by step: buffers live for the whole run first, then larger
    first (ties: earlier start, then order); each takes the start of the smallest free gap (then
    the lowest) among the byte ranges of placed buffers live at a common step, else the top."""
    first = min(b.start for b in buffers)
    last = max(b.end for b in buffers)
    order = sorted(range(len(buffers)), key=lambda i: (
        not (buffers[i].start == first and buffers[i].end == last), -buffers[i].size, buffers[i].start, i))
    placed: dict[str, int] = {}
    for i in order:
        b = buffers[i]
        steps = live_steps(b.start, b.end, period)
        busy = sorted((placed[o.id], placed[o.id] + o.size) for o in buffers
                      if o.id in placed and steps & live_steps(o.start, o.end, period))
        best, best_gap, reach = None, None, 0
        for lo, hi in busy + [(10 ** 18, 10 ** 18)]:
            start = -(-reach // b.alignment) * b.alignment
            if lo > reach and start + b.size <= lo and (best_gap is None or lo - reach < best_gap):
                best, best_gap = start, lo - reach
            reach = max(reach, hi)
        placed[b.id] = best
    return placed

"""Decision procedure: does every buffer fit under a capacity? A search over canonical packings.

After MiniMalloc (Moffitt, ASPLOS'23). Buffers are placed one at a time at their lowest
legal offset (``floor``: above every placed buffer live at the same time), in
non-decreasing (offset, static rank) order, so each packing is reached at most once.
Pruning, all sound (a packing that fits is never cut off):

- dominance: a buffer is not placed at or above the lowest top (floor + size) of another
  unplaced one, which would leave a gap that buffer could fill (section 4.3);
- monotone floor: every later buffer starts at or above the current offset, so each
  section still needs offset + its unplaced bytes <= capacity;
- section inference: in every section, the unplaced buffers stack above the lowest
  floor among them: min floor + unplaced bytes <= capacity (section 4.4);
- decomposition: once every buffer crossing a section boundary is placed, the two sides
  are independent sub-problems, each solved on its own (section 4.5).

Searches with different static orders (max section total, area, lifetime) run side by
side, each resumed for a slice of nodes that doubles every round (the search is a
generator that pauses), which tames the heavy tail of any single order without ever
repeating work: the first to finish decides.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from allocators.lifetimes import Problem
from allocators.placement import UNBOUNDED, slot_of
from allocators.sweep import Sweep

INF = np.int64(UNBOUNDED)
HEURISTICS = ("TAW", "TWA", "WAT")  # T: max section total, A: area, W: lifetime; all descending
# a search step: yields to pause (the caller resumes it), returns whether a packing exists
Search = Generator[None, None, bool]


@dataclass(frozen=True)
class Instance:
    """Arrays the search reads, built once per problem."""

    n: int
    size: np.ndarray
    sizes: list                       # the same as Python ints, for the hot loop
    lifts: dict                       # buffer -> Slot, for buffers with bank windows
    ranges: tuple                     # per buffer: section ranges
    span: np.ndarray                  # (n, 2) first section, last + 1
    neighbours: tuple                 # per buffer: buffers live at a common time
    nb_align: tuple | None            # per buffer: its neighbours' alignments (None when all are 1)
    win: tuple                        # per buffer: (w0, w1, pair indices, reduceat offsets) of the
                                      # sections whose floor or load placing it can change
    pair_buf: np.ndarray              # section members, section after section (n = padding)
    pair_start: np.ndarray            # first pair of each section (and one past the end)
    totals: np.ndarray
    area: list
    lifetime: list

    @classmethod
    def build(cls, problem: Problem, sw: Sweep) -> "Instance":
        n, m = len(problem.buffers), sw.sections
        size = np.array([b.size for b in problem.buffers], dtype=np.int64)
        align = np.array([b.alignment for b in problem.buffers], dtype=np.int64)
        slots = [slot_of(b, problem.bank_size) for b in problem.buffers]
        lifts = {i: s for i, s in enumerate(slots) if s.constrained}
        members = [mem if len(mem) else np.array([n]) for mem in sw.members]
        pair_buf = np.concatenate(members).astype(np.int64) if m else np.zeros(0, np.int64)
        pair_start = np.concatenate([[0], np.cumsum([len(x) for x in members])]).astype(np.int64)
        window = sw.span.copy()
        for b in range(n):
            nb = sw.neighbours[b]
            if len(nb):
                window[b, 0] = min(window[b, 0], sw.span[nb, 0].min())
                window[b, 1] = max(window[b, 1], sw.span[nb, 1].max())
        aligned = not (align == 1).all()
        win = tuple((int(w0), int(w1), pair_buf[pair_start[w0]:pair_start[w1]],
                     pair_start[w0:w1] - pair_start[w0]) for w0, w1 in window.tolist())
        return cls(n=n, size=size, sizes=size.tolist(), lifts=lifts, ranges=sw.ranges, span=sw.span,
                   neighbours=sw.neighbours,
                   nb_align=tuple(align[nb] for nb in sw.neighbours) if aligned else None,
                   win=win, pair_buf=pair_buf, pair_start=pair_start, totals=sw.totals.astype(np.int64),
                   area=[b.area for b in problem.buffers], lifetime=[b.lifetime for b in problem.buffers])

    def initial_floor(self, b: int) -> int:
        slot = self.lifts.get(b)
        return slot.lift(0) if slot is not None else 0


@dataclass(frozen=True)
class SearchOutcome:
    """``found`` (offsets valid), ``infeasible`` (proved), or ``unknown`` (budget ran out)."""

    status: str
    offsets: np.ndarray | None
    nodes: int


class _Search:
    """One depth-first search with one static order; a generator that pauses when told to."""

    def __init__(self, inst: Instance, capacity: int, heuristic: str, deadline: float):
        self.inst, self.cap, self.heuristic = inst, capacity, heuristic
        self.pause_at, self.deadline = 0, deadline  # node count at which to yield control
        n = inst.n
        self.N = n + 1  # key = floor * N + rank orders by (floor, rank)
        self.floor = np.array([inst.initial_floor(b) for b in range(n)] + [UNBOUNDED], dtype=np.int64)
        self.total = inst.totals.copy()
        span = inst.span
        m = len(inst.totals)
        self.cuts = np.zeros(max(m - 1, 0), dtype=np.int64)  # buffers spanning boundary s | s+1
        for b in range(n):
            self.cuts[span[b, 0]:span[b, 1] - 1] += 1
        self.offsets = np.full(n, -1, dtype=np.int64)
        self.nodes = 0

    def run(self) -> Search:
        """Generator: yields to pause, returns True (packing in ``offsets``) or False (none exists)."""
        inst = self.inst
        if len(self.total) and int(self.total.max()) > self.cap:
            return False
        if int((self.floor[:-1] + inst.size).max(initial=0)) > self.cap:
            return False
        cut_points = [0] + (np.flatnonzero(self.cuts == 0) + 1).tolist() + [len(self.total)]
        everyone = np.arange(inst.n)
        for x, y in zip(cut_points, cut_points[1:]):
            part = everyone[(inst.span[:, 1] > x) & (inst.span[:, 0] < y)]
            if len(part) and not (yield from self._subsolve(part, x, y)):
                return False
        return True

    def _subsolve(self, bufs: np.ndarray, a: int, z: int) -> Search:
        """Solve an independent sub-problem with a fresh static order (its own canonical order)."""
        inst, total = self.inst, self.total
        keys = []
        for b in bufs.tolist():
            t = max(int(total[lo:hi].max()) for lo, hi in inst.ranges[b])
            fields = {"T": t, "A": inst.area[b], "W": inst.lifetime[b]}
            keys.append(tuple(-fields[c] for c in self.heuristic) + (b,))
        keys.sort()
        by_rank = np.array([k[-1] for k in keys], dtype=np.int64)
        rank = np.zeros(inst.n + 1, dtype=np.int64)
        rank[by_rank] = np.arange(len(by_rank))
        return (yield from self._search(by_rank, rank, by_rank, a, z, -1))

    def _search(self, cands, rank, by_rank, a: int, z: int, last_key: int) -> Search:
        self.nodes += 1
        if self.nodes >= self.pause_at or (not self.nodes & 255 and time.perf_counter() > self.deadline):
            yield
        inst, floor, total, cap, N = self.inst, self.floor, self.total, self.cap, self.N
        fl = floor[cands]
        live = fl < INF
        cands, fl = cands[live], fl[live]
        if not len(cands):
            return True
        # dominance: nothing may start at or above the lowest top of an unplaced buffer
        min_top = int((fl + inst.size[cands]).min())
        # monotone floor: later buffers start at or above this offset, under every section's load;
        # it also makes max(offset, floor) + load <= capacity reduce to floor + load <= capacity below
        max_offset = cap - int(total[a:z].max())
        keys = np.sort(fl * N + rank[cands])
        keys = keys[keys.searchsorted(last_key, side="right"):]
        for key in keys.tolist():
            o, r = divmod(key, N)
            if o >= min_top or o > max_offset:
                break
            b = int(by_rank[r])
            size = inst.sizes[b]
            top = o + size
            # place b: neighbours' floors rise to its top (placed ones hold INF and stay there)
            nb = inst.neighbours[b]
            old = floor[nb]
            if inst.nb_align is None:
                floor[nb] = np.maximum(old, top)
            else:
                al = inst.nb_align[b]
                floor[nb] = np.maximum(old, -(-top // al) * al)
            stranded = self._lift_banked(nb, old, top) if inst.lifts else False
            floor[b] = INF
            for lo, hi in inst.ranges[b]:
                total[lo:hi] -= size
            self.offsets[b] = o
            # section inference where floors or loads changed: lowest floor + load <= capacity
            w0, w1, pairs, starts = inst.win[b]
            if w0 < a or w1 > z:  # placed neighbours may reach past this partition
                w0, w1 = max(w0, a), min(w1, z)
                p0 = int(inst.pair_start[w0])
                pairs, starts = inst.pair_buf[p0:inst.pair_start[w1]], inst.pair_start[w0:w1] - p0
            lowest = np.minimum.reduceat(floor[pairs], starts)
            ok = not stranded and int((np.minimum(lowest, cap) + total[w0:w1]).max()) <= cap
            if ok:
                ok = yield from self._descend(b, key, cands, rank, by_rank, a, z)
            for lo, hi in inst.ranges[b]:
                total[lo:hi] += size
            floor[nb] = old
            floor[b] = o  # b's floor was o when it was chosen
            if ok:
                return True
        return False

    def _lift_banked(self, nb, old, top: int) -> bool:
        """Move raised neighbours with bank windows to their next legal start; True if one has none."""
        inst, floor, cap = self.inst, self.floor, self.cap
        stranded = False
        for c in inst.lifts.keys() & set(nb[old < top].tolist()):
            start = inst.lifts[c].lift(top)
            stranded |= start + inst.sizes[c] > cap
            floor[c] = min(start, cap + 1)  # no legal start: a floor above the capacity prunes it
        return stranded

    def _descend(self, b: int, key: int, cands, rank, by_rank, a: int, z: int) -> Search:
        """Continue in this partition, or split it if b was the last buffer across a boundary."""
        s0, s1 = int(self.inst.span[b, 0]), int(self.inst.span[b, 1])
        cuts = self.cuts[s0:max(s1 - 1, s0)]
        cuts -= 1
        try:
            zeros = np.flatnonzero(cuts == 0)
            if not len(zeros):
                return (yield from self._search(cands, rank, by_rank, a, z, key))
            rest = cands[self.floor[cands] < INF]
            bounds = [a] + (zeros + s0 + 1).tolist() + [z]
            span = self.inst.span
            for x, y in zip(bounds, bounds[1:]):
                part = rest[(span[rest, 1] > x) & (span[rest, 0] < y)]
                if len(part) and not (yield from self._subsolve(part, x, y)):
                    return False
            return True
        finally:
            cuts += 1


@contextmanager
def _recursion_room(depth: int):
    """The search recurses once per placed buffer; make room, then restore the old limit."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * depth + 1000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def decide(inst: Instance, capacity: int, deadline: float, heuristics=HEURISTICS) -> SearchOutcome:
    """Find a packing under ``capacity``, prove there is none, or run out of time."""
    searches = [_Search(inst, capacity, h, deadline) for h in heuristics]
    running = [(search, search.run()) for search in searches]
    share = max(2 * inst.n, 64)
    with _recursion_room(inst.n):
        while True:
            for search, steps in running:
                search.pause_at = search.nodes + share
                try:
                    next(steps)
                except StopIteration as done:
                    for _, other in running:
                        other.close()
                    nodes = sum(s.nodes for s in searches)
                    # a search that ran to completion is exhaustive: its answer is proved
                    if done.value:
                        return SearchOutcome("found", search.offsets.copy(), nodes)
                    return SearchOutcome("infeasible", None, nodes)
                if time.perf_counter() > deadline:
                    for _, other in running:
                        other.close()
                    return SearchOutcome("unknown", None, sum(s.nodes for s in searches))
            share *= 2

"""LayerGroup local-memory allocation (after Sophgo TPU-MLIR's LmemAllocator).

Buffers are ranked by (bank conflict first, larger area = lifetime x size, earlier
start); at every step the buffer that fits at the lowest address is placed, ties going
to the higher-ranked one. A buffer a DMA engine touches while compute touches another
live buffer (or the reverse) avoids that buffer's banks when the capacity allows it,
and shares a bank only when nothing else fits (TPU-MLIR does the same).
"""

from __future__ import annotations

import bisect
import heapq

from allocators.errors import InputError, NoPlacementError
from allocators.lifetimes import Problem, segments
from allocators.placement import UNBOUNDED, lowest_fit, slot_of
from allocators.sweep import Sweep


def conflict_partners(problem: Problem, sw: Sweep) -> list[set[int]]:
    """Per buffer, the buffers that are DMA-accessed while it is computed on, or vice versa."""
    bufs = problem.buffers
    partners: list[set[int]] = [set() for _ in bufs]
    for u, b in enumerate(bufs):
        for t in b.dma_steps:
            tt = t % problem.period if problem.period else t
            if not any(lo <= tt < hi for lo, hi in segments(b, problem.period)):
                raise InputError(f"buffer {b.id!r}: DMA step {t} outside its lifetime [{b.start}, {b.end})")
            s = int(sw.times.searchsorted(tt, side="right")) - 1
            for v in sw.members[s]:
                v = int(v)
                if v != u and t not in bufs[v].dma_steps:
                    partners[u].add(v)
                    partners[v].add(u)
    return partners


def banks_of(offset: int, size: int, bank_size: int) -> range:
    return range(offset // bank_size, (offset + size - 1) // bank_size + 1)


def bank_conflicts(problem: Problem, offsets: list[int], partners: list[set[int]]) -> int:
    """Conflicting pairs (DMA against compute in the same step) placed in a common bank."""
    if not problem.bank_size:
        return 0
    bs, bufs = problem.bank_size, problem.buffers
    count = 0
    for u, vs in enumerate(partners):
        bu = set(banks_of(offsets[u], bufs[u].size, bs))
        count += sum(1 for v in vs if v > u and bu.intersection(banks_of(offsets[v], bufs[v].size, bs)))
    return count


def layergroup(problem: Problem, sw: Sweep, capacity: int | None,
               partners: list[set[int]]) -> list[int]:
    """Offsets (in buffer order) of the LayerGroup placement."""
    bufs = problem.buffers
    n = len(bufs)
    slots = [slot_of(b, problem.bank_size) for b in bufs]
    bank_size = problem.bank_size or 0
    avoid_banks = bool(bank_size) and capacity is not None
    limit = UNBOUNDED if capacity is None else capacity  # only bank avoidance (which needs a capacity) reads it
    rank = {u: r for r, u in enumerate(sorted(
        range(n), key=lambda u: (-int(bool(partners[u])), -bufs[u].area, bufs[u].start, u)))}
    busy: list[list[tuple[int, int]]] = [[] for _ in range(n)]   # placed neighbours
    banned: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # banks of placed conflict partners
    conflicted = [False] * n  # no bank-avoiding place under the capacity: share a bank
    low = [s.lift(0) for s in slots]
    offsets = [-1] * n
    heap = [(low[u], rank[u], u) for u in range(n)]
    heapq.heapify(heap)

    def evaluate(v: int) -> int:
        if not banned[v] or conflicted[v]:
            return lowest_fit(slots[v], busy[v], low[v])
        o = lowest_fit(slots[v], list(heapq.merge(busy[v], banned[v])), low[v])
        if o + bufs[v].size <= limit:
            return o
        conflicted[v] = True
        return lowest_fit(slots[v], busy[v], 0)

    def block(v: int, rng: tuple[int, int], store: list[list[tuple[int, int]]]) -> None:
        bisect.insort(store[v], rng)
        if store is banned and conflicted[v]:
            return
        if rng[0] < low[v] + bufs[v].size and low[v] < rng[1]:  # the range hits v's current place
            low[v] = evaluate(v)
            heapq.heappush(heap, (low[v], rank[v], v))

    while heap:
        at, _, u = heapq.heappop(heap)
        if offsets[u] >= 0 or at != low[u]:
            continue  # stale entry
        if at >= UNBOUNDED:
            raise NoPlacementError(f"buffer {bufs[u].id!r}: no free range in its allowed banks")
        offsets[u] = at
        rng = (at, at + bufs[u].size)
        for v in sw.neighbours[u]:
            if offsets[v] < 0:
                block(int(v), rng, busy)
        if avoid_banks:
            first, last = at // bank_size, (at + bufs[u].size - 1) // bank_size
            bank_rng = (first * bank_size, (last + 1) * bank_size)
            for v in partners[u]:
                if offsets[v] < 0:
                    block(v, bank_rng, banned)
    return offsets

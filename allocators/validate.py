"""Independent checker of a placement: no two buffers may overlap in both time and address.

Written without any planner code, so a planner bug cannot hide itself: a sweep over
sections looks at each pair of co-live buffers once per section they share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from allocators.lifetimes import Problem
from allocators.sweep import sweep


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``kind`` is overlap, alignment, capacity, bank or missing."""

    kind: str
    buffers: tuple[str, ...]
    detail: str


def peak(problem: Problem, offsets: dict[str, int]) -> int:
    """Highest address used (offset + size over all buffers); 0 for an empty problem."""
    return max((offsets[b.id] + b.size for b in problem.buffers), default=0)


def violations(problem: Problem, offsets: dict[str, int], capacity: int | None = None,
               limit: int = 100) -> list[Violation]:
    """Every violated rule (up to ``limit``); an empty list means the placement is valid."""
    found: list[Violation] = []
    for b in problem.buffers:
        if b.id not in offsets:
            found.append(Violation("missing", (b.id,), "no offset"))
            continue
        off = offsets[b.id]
        if off < 0:
            found.append(Violation("capacity", (b.id,), f"negative offset {off}"))
        if off % b.alignment:
            found.append(Violation("alignment", (b.id,), f"offset {off} not a multiple of {b.alignment}"))
        if capacity is not None and off + b.size > capacity:
            found.append(Violation("capacity", (b.id,), f"[{off}, {off + b.size}) exceeds capacity {capacity}"))
        if b.banks is not None and problem.bank_size is not None:
            first, last = off // problem.bank_size, (off + b.size - 1) // problem.bank_size
            outside = sorted(set(range(first, last + 1)) - b.banks)
            if outside:
                found.append(Violation("bank", (b.id,), f"uses bank(s) {outside}, allowed {sorted(b.banks)}"))
    if any(v.kind == "missing" for v in found):
        return found[:limit]
    found += _overlaps(problem, offsets, limit)
    return found[:limit]


def is_valid(problem: Problem, offsets: dict[str, int], capacity: int | None = None) -> bool:
    return not violations(problem, offsets, capacity, limit=1)


def _overlaps(problem: Problem, offsets: dict[str, int], limit: int) -> list[Violation]:
    """Pairs live in a common section whose address ranges intersect (each pair reported once)."""
    sw = sweep(problem)
    lo = np.array([offsets[b.id] for b in problem.buffers], dtype=np.int64)
    hi = lo + np.array([b.size for b in problem.buffers], dtype=np.int64)
    reported: set[tuple[int, int]] = set()
    out: list[Violation] = []
    for s, members in enumerate(sw.members):
        if len(members) < 2:
            continue
        order = members[np.argsort(lo[members], kind="stable")]
        # sorted by start address: a buffer overlaps a later one iff it ends after that one starts
        running_end = np.maximum.accumulate(hi[order])
        bad = np.flatnonzero(running_end[:-1] > lo[order[1:]])
        for k in bad:
            j = int(order[k + 1])
            for i in order[: k + 1]:
                i = int(i)
                pair = (min(i, j), max(i, j))
                if hi[i] > lo[j] and pair not in reported:
                    reported.add(pair)
                    a, b = problem.buffers[pair[0]], problem.buffers[pair[1]]
                    t0 = int(sw.times[s])
                    out.append(Violation("overlap", (a.id, b.id),
                                         f"both live at time {t0}; addresses [{lo[pair[0]]}, {hi[pair[0]]}) and "
                                         f"[{lo[pair[1]]}, {hi[pair[1]]})"))
                    if len(out) >= limit:
                        return out
    return out

"""Shadow oracle: the true life of every allocation, checked after the run.

Units log what really happens to references, independently of the messages that are
meant to keep the MU's counts right: an MU logs ALLOC (the requester now holds the one
reference), every FREE it performs, and every ACCESS it serves with a reference whose
allocation is no longer the one behind that buffer id; a holder logs COPY when it hands
a reference to another unit and DROP when it lets one go. Each shard keeps its own
log; ``merge_logs`` puts them in a fixed order (cycle, holders before MUs, unit, the
unit's own sequence), so the verdict is the same for any shard count.

Verdicts: ``use_after_free`` counts operations on a freed allocation;
``double_free`` counts frees of an allocation already freed; ``premature_free``
counts frees while true references were still live (the cause of the use after free
that usually follows). An allocation never freed is a leak only at the end of a run that
completed (no one can reach it any more); when a run stopped short (deadlocked, cut off) it
is ``live_at_end``: still in use, or its free still to come, when the run stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ALLOC, COPY, DROP, ACCESS, FREE = range(5)
EVENT_NAMES = ("alloc", "copy", "drop", "access", "free")
HOLDER, MEMORY = 0, 1  # order class within a cycle
_CLASS = (MEMORY, HOLDER, HOLDER, MEMORY, MEMORY)
COLUMNS = ("cycle", "order", "unit", "seq", "event", "alloc")


SYSTEM_SHIFT = 56  # allocation ids are below 2**56 (an MU unit id of 24 bits, then a 32-bit count)


def system_alloc(chip: int, alloc: int) -> int:
    """An allocation id unique over a system of chips: the chip whose MU made it, then its id there.
    A holder of another chip's reference logs its copies and drops with it (sim/chip/references.py)."""
    assert 0 <= chip < (1 << (62 - SYSTEM_SHIFT)) and 0 <= alloc < (1 << SYSTEM_SHIFT)
    return ((chip + 1) << SYSTEM_SHIFT) | alloc


def system_log(chip: int, log: np.ndarray) -> np.ndarray:
    """A chip's log with its own allocation ids made unique over the system (others' already are)."""
    out = log.copy()
    if len(out):
        col = COLUMNS.index("alloc")
        local = (out[:, col] >= 0) & (out[:, col] < (1 << SYSTEM_SHIFT))
        out[local, col] = ((chip + 1) << SYSTEM_SHIFT) | out[local, col]
    return out


def entry(cycle: int, unit: int, seq: int, event: int, alloc: int) -> tuple:
    return (cycle, _CLASS[event], unit, seq, event, alloc)


@dataclass
class Verdict:
    use_after_free: int = 0
    double_free: int = 0
    premature_free: int = 0
    leaks: int = 0  # never freed by the end of a completed run
    live_at_end: int = 0  # never freed when a run that did not complete stopped
    live_references_at_end: int = 0
    first: list = field(default_factory=list)  # up to 20 (cycle, unit, what, alloc) violations

    @property
    def violations(self) -> int:
        return self.use_after_free + self.double_free + self.premature_free


def merge_logs(logs: list[np.ndarray]) -> np.ndarray:
    """Concatenate per-shard [n, 6] logs and sort them into the canonical order."""
    logs = [a for a in logs if len(a)]
    if not logs:
        return np.zeros((0, len(COLUMNS)), dtype=np.int64)
    a = np.concatenate(logs)
    return a[np.lexsort((a[:, 3], a[:, 2], a[:, 1], a[:, 0]))]


def check_log(log: np.ndarray, completed: bool = True) -> Verdict:
    """The verdict on a merged log; ``completed``: the run finished all its work (else the
    allocations it had not freed are live at its end, not leaks). It walks the log a chunk at a
    time and remembers of each allocation only what a later event can still need: the live
    references of one not freed yet, and that one was freed."""
    v = Verdict()
    live: dict[int, int] = {}  # allocated, not freed: its live references
    unseen: dict[int, int] = {}  # references copied and dropped of allocations not (yet) made in the log
    freed: set[int] = set()

    def note(row, what):
        if len(v.first) < 20:
            v.first.append((int(row[0]), int(row[2]), what, int(row[5])))

    for start in range(0, len(log), 4096):
        for row in log[start:start + 4096].tolist():
            ev, a = row[4], row[5]
            if ev == ALLOC:
                live[a] = 1
                unseen.pop(a, None)
            elif ev == COPY or ev == DROP:
                if a in live:  # (a freed allocation's count no longer matters)
                    live[a] += 1 if ev == COPY else -1
                elif a not in freed:
                    unseen[a] = unseen.get(a, 0) + (1 if ev == COPY else -1)
            elif ev == ACCESS:
                if a in freed:
                    v.use_after_free += 1
                    note(row, "use after free")
            elif ev == FREE:
                if a in freed or a not in live:
                    v.double_free += 1
                    note(row, "double free")
                else:
                    if live.pop(a) > 0:
                        v.premature_free += 1
                        note(row, "free while referenced")
                    freed.add(a)
    unfreed = len(live)
    v.leaks, v.live_at_end = (unfreed, 0) if completed else (0, unfreed)
    v.live_references_at_end = sum(n for n in live.values() if n > 0) + sum(n for n in unseen.values() if n > 0)
    return v

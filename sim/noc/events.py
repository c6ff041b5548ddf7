"""A calendar of batched events: cycle -> the arrays of everything due at that cycle.

Flits and credits are pushed as column batches (one numpy array per field) and popped
all at once when their cycle comes, so a cycle costs one concatenate per field rather
than one Python operation per flit.
"""

from __future__ import annotations

import heapq

import numpy as np


class Calendar:
    def __init__(self, fields: int):
        self.fields = fields
        self._due: dict[int, list[tuple[np.ndarray, ...]]] = {}
        self._times: list[int] = []

    def push(self, cycle: int, *columns: np.ndarray) -> None:
        if len(columns[0]) == 0:
            return
        batch = self._due.get(cycle)
        if batch is None:
            self._due[cycle] = [columns]
            heapq.heappush(self._times, cycle)
        else:
            batch.append(columns)

    def push_many(self, cycles: np.ndarray, *columns: np.ndarray) -> None:
        """Push rows with differing due cycles (used for inbound boundary traffic)."""
        if len(cycles) == 0:
            return
        order = np.argsort(cycles, kind="stable")
        cycles = cycles[order]
        columns = [c[order] for c in columns]
        cuts = np.flatnonzero(np.diff(cycles)) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [len(cycles)]))
        for s, e in zip(starts.tolist(), ends.tolist()):
            self.push(int(cycles[s]), *(c[s:e] for c in columns))

    def pop(self, cycle: int):
        """Everything due at ``cycle`` as one array per field, or None."""
        batch = self._due.pop(cycle, None)
        if batch is None:
            return None
        if self._times[0] != cycle:  # an earlier cycle was skipped: a scheduling bug
            raise RuntimeError(f"events due at cycle {self._times[0]} were never processed")
        heapq.heappop(self._times)
        if len(batch) == 1:
            return batch[0]
        return tuple(np.concatenate([b[i] for b in batch]) for i in range(self.fields))

    def next_time(self) -> float:
        return self._times[0] if self._times else float("inf")

    def pending(self) -> int:
        """Rows not yet popped."""
        return sum(len(b[0]) for batch in self._due.values() for b in batch)

    def __bool__(self) -> bool:
        return bool(self._due)

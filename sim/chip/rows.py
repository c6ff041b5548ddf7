"""Integer rows a run keeps, stored compactly: appended as tuples, packed into int64 arrays
every ``CHUNK`` rows (48 bytes for a 6-column row instead of about 200 as a tuple of ints).
A run keeps a few such rows per request (its oracle events, its buffers' lives), so a long run stays small."""

from __future__ import annotations

import numpy as np

CHUNK = 4096


class Rows:
    """Rows of ``width`` integers, in the order they were appended."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._pending: list[tuple] = []
        self._chunks: list[np.ndarray] = []

    def append(self, row: tuple) -> None:
        self._pending.append(row)
        if len(self._pending) >= CHUNK:
            self._pack()

    def _pack(self) -> None:
        if self._pending:
            try:
                chunk = np.array(self._pending, dtype=np.int64)
            except OverflowError:  # a value beyond int64 (a partial-free weight of 2^63 or more): kept as is
                chunk = np.array(self._pending, dtype=object)
            self._chunks.append(chunk.reshape(-1, self.width))
            self._pending = []

    def array(self) -> np.ndarray:
        """Every row so far, as one [n, width] int64 array (of Python ints if a value is beyond int64)."""
        self._pack()
        if len(self._chunks) > 1:
            self._chunks = [np.concatenate(self._chunks)]
        return self._chunks[0] if self._chunks else np.zeros((0, self.width), dtype=np.int64)

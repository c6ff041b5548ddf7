"""An order-free digest of a multiset of integer rows, folded as the rows come.

A run's result hash covers every message delivery and every work record, but a run must not
keep them (a token makes tens of deliveries: a long run would grow with its tokens). Each row
is mixed to two 64-bit words (SplitMix64's finaliser, Steele, Lea & Flood, OOPSLA 2014, applied
column after column from two seeds) and the words are summed modulo 2^64, with the count: an incremental multiset hash
(Bellare & Micciancio's AdHash, EUROCRYPT 1997). The sum does not depend on the order the rows
come in, so each shard folds its own and the shards' digests add up to the same value for any
shard count; a changed, missing or extra row changes it.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_SEEDS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03))
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
CHUNK = 8192  # rows gathered before they are folded


def _mix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def code(text: str) -> int:
    """A string column as an integer for a row (CRC-32 of its UTF-8 bytes)."""
    return zlib.crc32(text.encode())


def row_words(rows: np.ndarray) -> tuple[int, int]:
    """The two words of an [n, k] int64 array's rows, summed (mod 2^64)."""
    if not len(rows):
        return 0, 0
    u = np.ascontiguousarray(rows, dtype=np.int64).view(np.uint64)
    out = []
    with np.errstate(over="ignore"):
        for seed in _SEEDS:
            z = np.full(len(u), seed, dtype=np.uint64)
            for j in range(u.shape[1]):
                z = _mix(z ^ u[:, j])
            out.append(int(z.sum(dtype=np.uint64)))
    return out[0], out[1]


@dataclass
class Digest:
    """Rows folded so far: the two sums and the count; rows not yet folded wait in ``pending``."""

    width: int
    a: int = 0
    b: int = 0
    count: int = 0
    pending: list = field(default_factory=list)

    def add(self, row: tuple) -> None:
        self.pending.append(row)
        if len(self.pending) >= CHUNK:
            self.fold()

    def fold(self) -> None:
        if self.pending:
            self.merge_rows(np.array(self.pending, dtype=np.int64).reshape(-1, self.width))
            self.pending = []

    def merge_rows(self, rows: np.ndarray) -> None:
        x, y = row_words(rows)
        self.a, self.b = (self.a + x) % 2**64, (self.b + y) % 2**64
        self.count += len(rows)

    def sealed(self) -> "Digest":
        """Every row folded (what a shard hands back)."""
        self.fold()
        return self


def combined(digests: list[Digest]) -> bytes:
    """The digests of every shard as one value (the same for any split of the rows)."""
    a = sum(d.a for d in digests) % 2**64
    b = sum(d.b for d in digests) % 2**64
    n = sum(d.count for d in digests)
    return a.to_bytes(8, "little") + b.to_bytes(8, "little") + n.to_bytes(8, "little")

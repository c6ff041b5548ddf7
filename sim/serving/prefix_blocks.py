"""Prefix blocks of a trace's prompts: which leading blocks two requests share.

Mooncake and Qwen-Bailian give each prompt's blocks as ``hash_ids`` (512 and 16 tokens a
block). Two requests share their first k blocks when their first k ids agree; a block is
named here by its whole prefix (ids 0..i), interned to a small integer, so that the i-th
blocks of two requests have the same prefix id exactly when their ids agree up to i. Both
publishers hash a block together with what precedes it, so an id names its prefix already;
interning the prefix as well keeps the rule exact for a trace whose ids do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class PrefixBlocks:
    """Every request's prompt blocks as prefix ids (request i's are ``ids[starts[i]:starts[i + 1]]``)."""

    block_tokens: int
    ids: np.ndarray  # int64
    starts: np.ndarray  # int64, one more than there are requests

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PrefixBlocks) and self.block_tokens == other.block_tokens and \
            np.array_equal(self.ids, other.ids) and np.array_equal(self.starts, other.starts)

    def __hash__(self) -> int:
        return hash((self.block_tokens, self.ids.tobytes(), self.starts.tobytes()))

    def of(self, i: int) -> np.ndarray:
        return self.ids[self.starts[i]:self.starts[i + 1]]

    def full(self, i: int, prompt: int) -> np.ndarray:
        """The prefix ids of the blocks a prompt of ``prompt`` tokens fills (a partial last block
        is its own: only whole blocks are shared, as vLLM's prefix cache shares them)."""
        return self.of(i)[: prompt // self.block_tokens]

    def take(self, rows: list[int]) -> "PrefixBlocks":
        """The blocks of the requests ``rows``, in that order."""
        parts = [self.of(i) for i in rows]
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        starts[1:] = np.cumsum([len(p) for p in parts])
        return PrefixBlocks(self.block_tokens, np.concatenate(parts) if parts else self.ids[:0], starts)


class PrefixInterner:
    """Builds PrefixBlocks request by request: the id of (previous block's prefix id, hash id)."""

    def __init__(self) -> None:
        self.node: dict[tuple[int, int], int] = {}
        self.ids: list[int] = []
        self.starts: list[int] = [0]

    def add(self, hashes) -> None:
        """The next request's ``hash_ids`` (a list of whole numbers; None or absent: no blocks)."""
        if hashes is None:
            hashes = []
        if not isinstance(hashes, list):
            raise ValueError(f"hash_ids {hashes!r} is not a list")
        parent = -1
        for h in hashes:
            if isinstance(h, bool) or not isinstance(h, int):
                raise ValueError(f"hash_ids holds {h!r}, not a whole number")
            parent = self.node.setdefault((parent, h), len(self.node))
            self.ids.append(parent)
        self.starts.append(len(self.ids))

    def blocks(self, block_tokens: int) -> PrefixBlocks:
        return PrefixBlocks(block_tokens, np.array(self.ids, dtype=np.int64), np.array(self.starts, dtype=np.int64))

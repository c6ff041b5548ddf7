"""Prefix sharing in a paged memory tier: the serve scheduler's automatic prefix caching (vLLM's).

A request's shareable prompt blocks (prefix_sharing.shareable_ids: ``block_tokens`` tokens each,
those ending before its last prompt token) are KV regions of their own in the tier, each a whole
number of pages; the rest of its KV (the tail: the prompt after them and every generated token)
is its own region, grown a page at a time. A block the step that computes it has written is
registered in the index by its prefix id, unless another sequence's copy is there already (its
copy then stays its own and is freed with it); an admission finds the leading blocks the index
holds (the **hits**), holds them instead of computing them, and its prefill starts after them:
the step computes the uncached prompt tokens and reads the hit ones as cached keys.

A registered block is reference counted by the sequences holding it (running, or swapped out:
a swap moves the tail only). When its last holder lets go it is kept in the prefix cache
(``memory.prefix_cache_bytes`` of KV; a request's blocks released last block first, the least
recently released dropped first, as vLLM v1's free queue orders them) or freed; the cache gives
its room back a block at a time when an admission or a step finds no room. The figures are the
toy's (prefix_sharing.PrefixLog).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.serving.prefix_sharing import PrefixLog, leading


@dataclass(eq=False)
class Block:
    """A prefix block's KV region in the tier (``region``: the backend's, -1 until taken)."""

    id: int  # its prefix id (prefix_blocks.py)
    pages: int
    region: int = -1
    holders: int = 1  # sequences holding it
    written: bool = False  # the step computing it has ended
    shared: bool = False  # in the index: later admissions find it


class PrefixPool:
    """The index of prefix blocks and the prefix cache (module docstring): which blocks to take,
    register and free; the batcher takes and frees their pages."""

    def __init__(self, block_tokens: int, trace_block_tokens: int, pages: int, block_bytes: int,
                 cache_bytes: int = 0) -> None:
        self.block_tokens = block_tokens
        self.group = block_tokens // trace_block_tokens  # trace blocks a block
        self.pages = pages  # of a block's region
        self.block_bytes = block_bytes  # KV bytes of a block (every layer, head, K and V; every chip)
        self.cache_bytes = cache_bytes
        self.index: dict[int, Block] = {}
        self.cached: dict[int, None] = {}  # registered blocks no sequence holds, least recently released first
        self.cached_bytes = 0
        self.saved = 0  # KV bytes held by more than one sequence, beyond the first copy

    def hits(self, ids) -> int:
        """Leading blocks of ``ids`` the index holds."""
        return leading(ids, self.index)

    def hold(self, ids, k: int) -> list[Block]:
        """An admission holds the first ``k`` blocks of ``ids`` (its hits)."""
        got = [self.index[int(i)] for i in ids[:k]]
        for b in got:
            if b.holders:
                self.saved += self.block_bytes  # one more sequence reads the one copy
            else:  # kept by the cache: held again
                del self.cached[b.id]
                self.cached_bytes -= self.block_bytes
            b.holders += 1
        return got

    def new(self, bid: int) -> Block:
        """A block a sequence is about to write (its own until written)."""
        return Block(int(bid), self.pages)

    def written(self, b: Block) -> None:
        """The step that computed ``b`` has ended: registered, unless the index has its id already."""
        b.written = True
        if b.id not in self.index:
            self.index[b.id] = b
            b.shared = True

    def release(self, blocks: list[Block]) -> list[Block]:
        """A sequence lets go of ``blocks`` (in block order): the blocks to free now."""
        free = []
        for b in reversed(blocks):  # last block first: the prompt's leading blocks stay cached longest
            b.holders -= 1
            if not b.shared:
                free.append(b)
            elif b.holders:
                self.saved -= self.block_bytes
            else:
                self.cached[b.id] = None
                self.cached_bytes += self.block_bytes
        return free + self.trim(self.cache_bytes)

    def trim(self, most: int) -> list[Block]:
        """Drop the least recently released cached blocks until they hold at most ``most`` bytes
        (0: every one): the blocks to free."""
        free = []
        while self.cached_bytes > most:
            bid = next(iter(self.cached))
            del self.cached[bid]
            self.cached_bytes -= self.block_bytes
            free.append(self.index.pop(bid))
        return free

    def log(self, seq: int, ids, k: int) -> PrefixLog:
        """A request's first admission: its blocks and hits in the trace's blocks."""
        return PrefixLog(seq, len(ids) * self.group, k * self.group, k * self.block_bytes, self.saved)

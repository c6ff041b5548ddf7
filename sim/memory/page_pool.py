"""A memory tier's capacity given out in pages: regions (a model's weights, a KV cache homed
off chip, an evicted buffer) that grow page by page and are freed whole.

The pages are allocators' paged blocks (``allocators/paged.py``: a free list and a block table
per region), one page being the tier's ``page_bytes``. A region that cannot grow because the
tier is full is refused whole (nothing changes): the tier is a memory that can fill, not an
edge rate. The pool is built on the first allocation, so a tier nothing uses costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from allocators.errors import OutOfMemoryError
from allocators.paged import BlockPool, PagedLayout, bits_for
from mapping.chips import TierSpec


@dataclass
class TierMemory:
    """Regions of a tier, each a whole number of pages; byte sizes are what they hold."""

    tier: TierSpec
    sizes: dict = field(default_factory=dict)  # region key -> bytes it holds
    peak_bytes: int = 0  # most bytes of pages ever taken
    refused: int = 0  # growths refused for want of pages
    _pool: BlockPool | None = None
    _ids: dict = field(default_factory=dict)  # region key -> the pool's buffer id

    @property
    def pages(self) -> int:
        return int(self.tier.capacity // self.tier.page_bytes)

    @property
    def used_bytes(self) -> int:
        return 0 if self._pool is None else self._pool.used_blocks * self.tier.page_bytes

    def holds(self, key) -> bool:
        return key in self.sizes

    def grow(self, key, nbytes: int) -> bool:
        """Region ``key`` (new or not) holds ``nbytes`` more; False, and nothing changed, if the
        tier has not the pages it needs."""
        pool = self._pool_()
        page = self.tier.page_bytes
        old = self.sizes.get(key, 0)
        more = -(-(old + nbytes) // page) - -(-old // page)
        if key not in self._ids:
            if more > len(pool.free_blocks):
                self.refused += 1
                return False
            self._ids[key] = self._fresh_id()
            pool.create(self._ids[key], more)
        elif more:
            try:
                pool.extend(self._ids[key], more)
            except OutOfMemoryError:
                self.refused += 1
                return False
        self.sizes[key] = old + nbytes
        self.peak_bytes = max(self.peak_bytes, self.used_bytes)
        return True

    def release(self, key) -> int:
        """Free region ``key`` (nothing if it has none); the bytes it held."""
        if key not in self._ids:
            return 0
        self._pool_().free(self._ids.pop(key))
        return self.sizes.pop(key)

    def _pool_(self) -> BlockPool:
        if self._pool is None:
            page = self.tier.page_bytes
            blocks = bits_for(self.pages)
            offset = bits_for(page // 4)
            self._pool = BlockPool(PagedLayout(self.pages * page, page, buffer_id_bits=32,
                                               virtual_bits=offset + blocks + 1))
        return self._pool

    def _fresh_id(self) -> int:
        used = set(self._ids.values())
        i = len(self._ids)
        while i in used:
            i += 1
        return i

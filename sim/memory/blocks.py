"""Paged blocks in one MU: a free list of physical blocks and a block table per buffer.

Stand-in until allocators/ ships its paged block allocator (issue 3). The block table
has a bounded number of entries for the whole MU (hardware holds it in a small SRAM):
a buffer can grow only while both a free block and a free entry exist. The free list
is a stack (the block freed last is reused first), as a hardware free list would be.
"""

from __future__ import annotations


class BlockPool:
    def __init__(self, blocks: int, block_bytes: int, table_entries: int):
        self.blocks = blocks
        self.block_bytes = block_bytes
        self.table_entries = table_entries
        self.free = list(range(blocks - 1, -1, -1))  # pop() hands out block 0 first
        self.tables: dict[int, list[int]] = {}  # buffer -> physical blocks, by virtual index
        self.mapped = 0

    def blocks_for(self, nbytes: int) -> int:
        return -(-nbytes // self.block_bytes)

    def create(self, buf: int) -> None:
        self.tables[buf] = []

    def can_grow(self, buf: int, nblocks: int) -> bool:
        extra = nblocks - len(self.tables[buf])
        return extra <= 0 or (extra <= len(self.free) and self.mapped + extra <= self.table_entries)

    def grow(self, buf: int, nblocks: int) -> int:
        """Map blocks until ``buf`` has ``nblocks``; returns how many were added (caller
        checks can_grow first)."""
        table = self.tables[buf]
        added = 0
        while len(table) < nblocks:
            table.append(self.free.pop())
            added += 1
        self.mapped += added
        return added

    def shrink(self, buf: int, nblocks: int) -> int:
        """Unmap trailing blocks until ``buf`` has ``nblocks``; returns how many were freed."""
        table = self.tables[buf]
        freed = 0
        while len(table) > nblocks:
            self.free.append(table.pop())
            freed += 1
        self.mapped -= freed
        return freed

    def release(self, buf: int) -> int:
        freed = self.shrink(buf, 0)
        del self.tables[buf]
        return freed

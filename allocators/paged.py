"""Paged blocks: buffer-level virtualisation of a scratchpad.

The scratchpad is a pool of fixed-size blocks with a free list (a stack of block ids);
each buffer has a block table mapping its virtual blocks to physical ones, so a buffer
grows block by block without moving and never needs contiguous space. Buffers carry a
reference count; with copy-on-write a copy shares its source's blocks (each block has
its own count) until one side writes a shared block, which is then copied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from allocators.errors import AllocatorError, InputError, OutOfMemoryError


def bits_for(count: int) -> int:
    """Bits to tell ``count`` values apart (at least 1)."""
    return max(1, math.ceil(math.log2(count))) if count > 1 else 1


@dataclass(frozen=True)
class PagedLayout:
    """Widths of the addressing fields (seed example: 64 MUs, 256 KiB, 4-byte words)."""

    capacity: int                  # bytes of the scratchpad
    block_size: int                # bytes per block
    word_bytes: int = 4
    mu_id_bits: int = 6
    buffer_id_bits: int = 16
    virtual_bits: int = 16         # virtual block + word offset inside a buffer

    def __post_init__(self):
        if self.block_size <= 0 or self.capacity < self.block_size:
            raise InputError(f"need 0 < block_size <= capacity (got {self.block_size}, {self.capacity})")
        if self.block_size % self.word_bytes:
            raise InputError(f"block_size {self.block_size} is not a whole number of {self.word_bytes}-byte words")
        if self.virtual_bits < self.offset_bits:
            raise InputError(f"virtual_bits {self.virtual_bits} cannot hold a {self.offset_bits}-bit word offset")

    @property
    def blocks(self) -> int:
        return self.capacity // self.block_size

    @property
    def block_bits(self) -> int:
        return bits_for(self.blocks)

    @property
    def offset_bits(self) -> int:
        """Word offset inside a block."""
        return bits_for(self.block_size // self.word_bytes)

    @property
    def physical_bits(self) -> int:
        """Physical block + word offset."""
        return self.block_bits + self.offset_bits

    @property
    def reference_bits(self) -> int:
        """A reference: (MU id, buffer id, virtual block + offset)."""
        return self.mu_id_bits + self.buffer_id_bits + self.virtual_bits

    @property
    def max_blocks_per_buffer(self) -> int:
        """Virtual blocks a buffer can address (virtual field minus the offset)."""
        return 1 << (self.virtual_bits - self.offset_bits)


@dataclass(frozen=True)
class Metadata:
    """Bits of bookkeeping an MU keeps for the pool in its current state."""

    free_list_bits: int      # one block id per free block
    block_table_bits: int    # one block id per mapped virtual block
    refcount_bits: int       # one counter per live buffer and per block
    reference_bits: int      # width of one reference

    @property
    def total_bits(self) -> int:
        return self.free_list_bits + self.block_table_bits + self.refcount_bits

    @property
    def total_bytes(self) -> int:
        return -(-self.total_bits // 8)


class BlockPool:
    """Fixed-size blocks, a free list, per-buffer block tables and reference counts."""

    def __init__(self, layout: PagedLayout, copy_on_write: bool = False, refcount_bits: int = 8):
        self.layout, self.copy_on_write, self.refcount_bits = layout, copy_on_write, refcount_bits
        self.free_blocks: list[int] = list(range(layout.blocks - 1, -1, -1))  # stack: block 0 on top
        self.block_refs = [0] * layout.blocks   # tables mapping each block
        self.tables: dict[int, list[int]] = {}
        self.refs: dict[int, int] = {}          # buffer -> holders
        self.copies = 0                         # blocks copied on write

    # ---------------------------------------------------------------- buffers
    def create(self, buffer: int, blocks: int = 0) -> None:
        if buffer in self.tables:
            raise AllocatorError(f"buffer {buffer} already exists")
        if not 0 <= buffer < 1 << self.layout.buffer_id_bits:
            raise InputError(f"buffer id {buffer} does not fit in {self.layout.buffer_id_bits} bits")
        if blocks > self.layout.max_blocks_per_buffer:
            raise AllocatorError(f"buffer {buffer}: {blocks} blocks exceed the {self.layout.max_blocks_per_buffer} "
                                 f"a {self.layout.virtual_bits}-bit virtual address can reach")
        self.tables[buffer] = self._take(blocks)  # raises before anything changes if blocks are short
        self.refs[buffer] = 1

    def extend(self, buffer: int, blocks: int = 1) -> list[int]:
        """Append ``blocks`` physical blocks to the buffer's table; all or nothing."""
        table = self._table(buffer)
        if len(table) + blocks > self.layout.max_blocks_per_buffer:
            raise AllocatorError(f"buffer {buffer}: {len(table) + blocks} blocks exceed the "
                                 f"{self.layout.max_blocks_per_buffer} a {self.layout.virtual_bits}-bit "
                                 f"virtual address can reach")
        new = self._take(blocks)
        table.extend(new)
        return new

    def truncate(self, buffer: int, blocks: int) -> None:
        """Keep the first ``blocks`` virtual blocks; release the rest."""
        table = self._table(buffer)
        if not 0 <= blocks <= len(table):
            raise AllocatorError(f"buffer {buffer}: cannot truncate {len(table)} blocks to {blocks}")
        for block in table[blocks:]:
            self._drop(block)
        del table[blocks:]

    def retain(self, buffer: int) -> None:
        self._table(buffer)
        self.refs[buffer] += 1

    def release(self, buffer: int) -> bool:
        """Drop one holder; frees the buffer (and its unshared blocks) at zero. True if freed."""
        self._table(buffer)
        self.refs[buffer] -= 1
        if self.refs[buffer] == 0:
            self.free(buffer)
            return True
        return False

    def free(self, buffer: int) -> None:
        self.truncate(buffer, 0)
        del self.tables[buffer]
        del self.refs[buffer]

    def copy(self, source: int, target: int) -> None:
        """New buffer ``target`` with ``source``'s contents: shares blocks under copy-on-write."""
        blocks = self._table(source)
        if self.copy_on_write:
            self.create(target)
            self.tables[target] = list(blocks)
            for block in blocks:
                self.block_refs[block] += 1
        else:
            self.create(target, len(blocks))
            self.copies += len(blocks)

    def write(self, buffer: int, virtual_block: int) -> int:
        """Physical block to write; a shared block is first copied (copy-on-write)."""
        table = self._table(buffer)
        block = self.translate(buffer, virtual_block)
        if self.block_refs[block] > 1:
            (fresh,) = self._take(1)
            self._drop(block)
            table[virtual_block] = fresh
            self.copies += 1
            return fresh
        return block

    # ---------------------------------------------------------------- queries
    def translate(self, buffer: int, virtual_block: int) -> int:
        table = self._table(buffer)
        if not 0 <= virtual_block < len(table):
            raise AllocatorError(f"buffer {buffer}: virtual block {virtual_block} outside [0, {len(table)})")
        return table[virtual_block]

    def address(self, buffer: int, offset: int) -> int:
        """Physical byte address of byte ``offset`` of the buffer."""
        block = self.translate(buffer, offset // self.layout.block_size)
        return block * self.layout.block_size + offset % self.layout.block_size

    @property
    def used_blocks(self) -> int:
        return self.layout.blocks - len(self.free_blocks)

    def metadata(self) -> Metadata:
        bits = self.layout.block_bits
        return Metadata(
            free_list_bits=len(self.free_blocks) * bits,
            block_table_bits=sum(len(t) for t in self.tables.values()) * bits,
            refcount_bits=(len(self.refs) + (self.used_blocks if self.copy_on_write else 0)) * self.refcount_bits,
            reference_bits=self.layout.reference_bits)

    def check(self) -> None:
        """Raise if bookkeeping is inconsistent: every block is free xor counted by its mappers."""
        mapped = [0] * self.layout.blocks
        for table in self.tables.values():
            for block in table:
                mapped[block] += 1
        free = set(self.free_blocks)
        if len(free) != len(self.free_blocks):
            raise AllocatorError("a block is on the free list twice")
        for block, count in enumerate(mapped):
            if count != self.block_refs[block] or (count == 0) != (block in free):
                raise AllocatorError(f"block {block}: mapped {count} times, counted {self.block_refs[block]}, "
                                     f"{'free' if block in free else 'not free'}")

    # ---------------------------------------------------------------- internals
    def _table(self, buffer: int) -> list[int]:
        table = self.tables.get(buffer)
        if table is None:
            raise AllocatorError(f"no buffer {buffer}")
        return table

    def _take(self, blocks: int) -> list[int]:
        if blocks < 0:
            raise InputError(f"block count must not be negative, got {blocks}")
        if blocks > len(self.free_blocks):
            size = self.layout.block_size
            raise OutOfMemoryError(blocks * size, blocks * size, len(self.free_blocks) * size,
                                   size if self.free_blocks else 0, what="block request")
        taken = [self.free_blocks.pop() for _ in range(blocks)]
        for block in taken:
            self.block_refs[block] = 1
        return taken

    def _drop(self, block: int) -> None:
        self.block_refs[block] -= 1
        if self.block_refs[block] == 0:
            self.free_blocks.append(block)

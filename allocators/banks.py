"""Lockstep allocation across N banks (after tt-metal's BankManager).

One free list describes every bank: a buffer gets the same offset in each bank, so one
address is valid everywhere. Interleaved buffers spread pages round-robin over the
banks; sharded buffers put one shard per bank. DRAM allocates bottom-up and SRAM (L1)
top-down by default, leaving L1's low end to the circular-buffer region, which grows up
from the reserved region and must never reach an allocated buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from allocators.errors import AllocatorError, InputError, OutOfMemoryError
from allocators.freelist import Block, FreeList, Statistics
from allocators.placement import align_up

MEMORY_KINDS = {"dram": False, "l1": True, "sram": True}  # kind -> top-down by default


def interleaved_bytes_per_bank(pages: int, page_size: int, banks: int, alignment: int) -> int:
    """ceil(pages / banks) x page size rounded up to the alignment (tt-metal's per-bank size)."""
    if pages <= 0 or page_size <= 0:
        raise InputError(f"interleaved buffer needs pages > 0 and page_size > 0 (got {pages}, {page_size})")
    return -(-pages // banks) * align_up(page_size, alignment)


def sharded_bytes_per_bank(shard_size: int, shards: int, banks: int, alignment: int) -> int:
    """Shards per bank (ceil(shards / banks)) x shard size rounded up to the alignment."""
    if shard_size <= 0 or shards <= 0:
        raise InputError(f"sharded buffer needs shard_size > 0 and shards > 0 (got {shard_size}, {shards})")
    return -(-shards // banks) * align_up(shard_size, alignment)


@dataclass(frozen=True)
class BankStatistics:
    """Per-bank statistics (identical in every bank) and the totals over all banks."""

    kind: str
    banks: int
    bank_size: int
    per_bank: Statistics

    @property
    def largest_interleaved_buffer(self) -> int:
        """Bytes of the largest buffer that can still be interleaved over all banks."""
        return self.per_bank.largest_free_block * self.banks

    @property
    def total_allocatable(self) -> int:
        return self.per_bank.total_allocatable * self.banks

    @property
    def total_allocated(self) -> int:
        return self.per_bank.allocated * self.banks

    @property
    def total_free(self) -> int:
        return self.per_bank.free * self.banks


class BankAllocator:
    """N banks of ``bank_size`` bytes allocated in lockstep, with a reserved low region."""

    def __init__(self, kind: str, banks: int, bank_size: int, alignment: int = 32, reserved: int = 0,
                 min_allocation: int = 0, top_down: bool | None = None, policy: str = "first_fit"):
        if kind not in MEMORY_KINDS:
            raise InputError(f"unknown memory kind {kind!r}; choose one of {', '.join(MEMORY_KINDS)}")
        if banks <= 0 or bank_size <= 0:
            raise InputError(f"{kind}: banks and bank_size must be positive (got {banks}, {bank_size})")
        if not 0 <= reserved < bank_size:
            raise InputError(f"{kind}: reserved region {reserved} B must lie inside the bank of {bank_size} B")
        self.kind, self.banks, self.bank_size, self.alignment = kind, banks, bank_size, alignment
        self.top_down = MEMORY_KINDS[kind] if top_down is None else top_down
        self.reserved = align_up(reserved, alignment)
        self.free_list = FreeList(bank_size, 0, alignment, min_allocation, floor=self.reserved, policy=policy)
        self.cb_top = self.reserved  # circular buffers occupy [reserved, cb_top)
        self._requests: dict[int, int] = {}  # address -> total bytes requested

    # ---------------------------------------------------------------- buffers
    def allocate(self, bytes_per_bank: int, top_down: bool | None = None, total: int | None = None) -> int:
        """Same offset in every bank for ``bytes_per_bank`` bytes; ``total`` only labels errors."""
        total = bytes_per_bank * self.banks if total is None else total
        try:
            address = self.free_list.allocate(bytes_per_bank, self.top_down if top_down is None else top_down)
        except OutOfMemoryError as err:
            raise OutOfMemoryError(total, err.per_bank, err.free, err.largest_free, self.banks,
                                   f"{self.kind} buffer") from None
        self._requests[address] = total
        return address

    def allocate_interleaved(self, pages: int, page_size: int, top_down: bool | None = None) -> int:
        """Pages spread round-robin over the banks."""
        per_bank = interleaved_bytes_per_bank(pages, page_size, self.banks, self.alignment)
        return self.allocate(per_bank, top_down, total=pages * page_size)

    def allocate_sharded(self, shard_size: int, shards: int, top_down: bool | None = None) -> int:
        """One shard per bank (more when there are more shards than banks)."""
        per_bank = sharded_bytes_per_bank(shard_size, shards, self.banks, self.alignment)
        return self.allocate(per_bank, top_down, total=shard_size * shards)

    def allocate_at(self, address: int, bytes_per_bank: int) -> int:
        address = self.free_list.allocate_at(address, bytes_per_bank)
        self._requests[address] = bytes_per_bank * self.banks
        return address

    def free(self, address: int) -> None:
        self.free_list.free(address)
        del self._requests[address]

    # ---------------------------------------------------------------- circular buffers
    def allocate_circular_buffer(self, size: int) -> int:
        """Grow the circular-buffer region by ``size`` bytes; error if it would reach a buffer."""
        if size <= 0:
            raise InputError(f"circular buffer size must be positive, got {size}")
        address = self.cb_top
        top = align_up(address + size, self.alignment)
        if top > self.bank_size:
            raise AllocatorError(f"{self.kind}: circular buffers [{self.reserved}, {top}) would exceed "
                                 f"the {self.bank_size}-byte bank")
        try:
            self.free_list.set_floor(top)
        except AllocatorError as err:
            raise AllocatorError(f"{self.kind}: circular buffers [{self.reserved}, {top}) would overlap "
                                 f"an allocated buffer: {err}") from None
        self.cb_top = top
        return address

    def clear_circular_buffers(self) -> None:
        self.free_list.set_floor(self.reserved)
        self.cb_top = self.reserved

    def check_circular_buffers(self) -> None:
        """Raise if any allocated buffer lies inside the circular-buffer region."""
        clash = [a for a in self.free_list.allocated() if a < self.cb_top]
        if clash:
            raise AllocatorError(f"{self.kind}: buffer at {clash[0]} lies inside the circular-buffer region "
                                 f"[{self.reserved}, {self.cb_top})")

    # ---------------------------------------------------------------- reports
    def statistics(self) -> BankStatistics:
        return BankStatistics(self.kind, self.banks, self.bank_size, self.free_list.statistics())

    def regions(self) -> list[tuple[str, Block]]:
        """Blocks of one bank in address order, each labelled reserved, circular_buffer, buffer or free."""
        out = []
        if self.reserved:
            out.append(("reserved", Block(0, self.reserved, True)))
        if self.cb_top > self.reserved:
            out.append(("circular_buffer", Block(self.reserved, self.cb_top - self.reserved, True)))
        return out + [("buffer" if b.allocated else "free", b) for b in self.free_list.blocks()]

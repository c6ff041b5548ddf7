"""MU memory policies: where a buffer's bytes live and what growing it costs.

A policy only does the bookkeeping (no timing): ``create`` reserves a new buffer,
``grow`` makes room for a larger size (or reports that memory ran out), ``shrink``
and ``release`` give room back. The MU unit turns the answers into time (copies at
the MU's bandwidth, block-table lookups) and into out-of-memory behaviour.

- ``static-single``: one statically sized buffer per MU (SARA/Revet style).
- ``static-multi``: fixed-size buffers, first fit from the MU's free list.
- ``realloc-copy``: a contiguous reservation; when full, a region ``growth`` times
  larger is allocated and the contents copied (both regions live during the copy),
  like a vector's growth.
- ``virtual``: blocks of ``block_bytes`` from a free list, mapped by a block table with
  a bounded number of entries (buffer-level virtualisation, the seed proposal).

The contiguous policies use allocators' tt-metal-style free list (first fit, bottom
up, coalescing); ``virtual`` uses allocators' paged block pool (a stack of free blocks
and a block table per buffer), with the MU-wide bound on block-table entries added
here.
"""

from __future__ import annotations

from dataclasses import dataclass

from allocators.errors import AllocatorError
from allocators.freelist import FreeList
from allocators.paged import BlockPool, PagedLayout

POLICIES = ("static-single", "static-multi", "realloc-copy", "virtual")


@dataclass(frozen=True)
class PolicyParams:
    policy: str = "virtual"
    capacity: int = 256 * 1024
    block_bytes: int = 4096  # virtual
    table_entries: int = 0  # virtual; 0 = one per block
    static_buffer_bytes: int = 0  # static-*; 0 = the whole MU (single) or capacity / buffers_per_mu (multi)
    buffers_per_mu: int = 4  # static-multi, when static_buffer_bytes is 0
    initial_bytes: int = 4096  # realloc-copy: first reservation (at least the initial size)
    growth: float = 2.0  # realloc-copy
    align: int = 64
    word_bytes: int = 4  # virtual: the reference's offset counts words
    mu_id_bits: int = 6
    buffer_id_bits: int = 16
    virtual_bits: int = 16  # virtual block + word offset in a reference

    def layout(self) -> PagedLayout:
        """allocators' paged layout (raises allocators.errors.InputError if inconsistent)."""
        return PagedLayout(self.capacity, self.block_bytes, self.word_bytes, self.mu_id_bits, self.buffer_id_bits,
                      self.virtual_bits)


@dataclass(frozen=True)
class Growth:
    reserved: int  # bytes newly reserved
    copy_bytes: int = 0  # bytes that must be copied before the old region can go
    old_start: int = -1  # realloc-copy: region to release once the copy is done


class Storage:
    """Common interface; ``used``/``reserved`` are the MU's live data and reserved bytes."""

    translates = False

    def __init__(self, p: PolicyParams):
        self.p = p
        self.capacity = p.capacity
        self.size: dict[int, int] = {}  # buffer -> bytes of data it holds
        self.used = 0
        self.reserved = 0

    def buffers(self) -> int:
        return len(self.size)

    def external_fragmentation(self) -> float:
        return 0.0

    def set_size(self, buf: int, nbytes: int) -> None:
        self.used += nbytes - self.size[buf]
        self.size[buf] = nbytes


class StaticStorage(Storage):
    """static-single and static-multi: fixed-size buffers from a first-fit free list."""

    def __init__(self, p: PolicyParams):
        super().__init__(p)
        single = p.policy == "static-single"
        default = p.capacity if single else p.capacity // max(1, p.buffers_per_mu)
        self.slot = p.static_buffer_bytes or default
        self.max_buffers = 1 if single else None
        self.extents = FreeList(p.capacity, alignment=p.align)
        self.start: dict[int, int] = {}
        self.cap: dict[int, int] = {}

    def _take(self, nbytes: int) -> int | None:
        try:
            return self.extents.allocate(nbytes)
        except AllocatorError:  # out of memory (or fragmented)
            return None

    def create(self, buf: int, nbytes: int) -> Growth | None:
        if self.max_buffers is not None and len(self.start) >= self.max_buffers:
            return None
        if nbytes > self.slot:
            return None
        s = self._take(self.slot)
        if s is None:
            return None
        self.start[buf] = s
        self.cap[buf] = self.extents.size_of(s)
        self.size[buf] = 0
        self.reserved += self.cap[buf]
        return Growth(self.cap[buf])

    def grow(self, buf: int, nbytes: int) -> Growth | None:
        return Growth(0) if nbytes <= self.cap[buf] else None

    def shrink(self, buf: int, nbytes: int) -> int:
        return 0

    def release(self, buf: int) -> int:
        n = self.cap.pop(buf)
        self.extents.free(self.start.pop(buf))
        self.used -= self.size.pop(buf)
        self.reserved -= n
        return n

    def external_fragmentation(self) -> float:
        st = self.extents.statistics()
        return 1.0 - st.largest_free_block / st.free if st.free else 0.0

    def regions(self) -> list[tuple[int, int, int, int]]:
        """(start, bytes, buffer or -1 for free, bytes in use) by address."""
        rows = [(s, self.cap[b], b, self.size[b]) for b, s in self.start.items()]
        rows += [(b.address, b.size, -1, 0) for b in self.extents.blocks() if not b.allocated]
        return sorted(rows)


class ReallocStorage(StaticStorage):
    """realloc-copy: grow by allocating ``growth`` x the region and copying."""

    def __init__(self, p: PolicyParams):
        Storage.__init__(self, p)
        self.extents = FreeList(p.capacity, alignment=p.align)
        self.start, self.cap = {}, {}
        self.max_buffers = None
        self.old: dict[int, int] = {}  # old region start -> size, until its copy finishes

    def create(self, buf: int, nbytes: int) -> Growth | None:
        s = self._take(max(nbytes, self.p.initial_bytes))
        if s is None:
            return None
        size = self.extents.size_of(s)
        self.start[buf], self.cap[buf], self.size[buf] = s, size, 0
        self.reserved += size
        return Growth(size)

    def grow(self, buf: int, nbytes: int) -> Growth | None:
        cap = self.cap[buf]
        if nbytes <= cap:
            return Growth(0)
        s = self._take(max(nbytes, int(cap * self.p.growth)))
        if s is None:
            return None
        size = self.extents.size_of(s)
        old = self.start[buf]
        self.old[old] = cap
        self.start[buf], self.cap[buf] = s, size
        self.reserved += size
        return Growth(size, copy_bytes=self.size[buf], old_start=old)

    def finish_copy(self, old_start: int) -> int:
        n = self.old.pop(old_start)
        self.extents.free(old_start)
        self.reserved -= n
        return n

    def regions(self) -> list[tuple[int, int, int, int]]:
        rows = super().regions()
        rows += [(s, n, -2, n) for s, n in self.old.items()]  # -2: a region being copied out
        return sorted(rows)


class VirtualStorage(Storage):
    """virtual: a buffer is a list of blocks; it grows and shrinks a block at a time."""

    translates = True

    def __init__(self, p: PolicyParams):
        super().__init__(p)
        self.pool = BlockPool(p.layout())
        self.entries = p.table_entries or self.pool.layout.blocks
        self.mapped = 0  # block-table entries in use, all buffers of the MU

    def _blocks(self, nbytes: int) -> int:
        return -(-nbytes // self.p.block_bytes)

    def _fits(self, extra: int) -> bool:
        return extra <= len(self.pool.free_blocks) and self.mapped + extra <= self.entries

    def create(self, buf: int, nbytes: int) -> Growth | None:
        need = self._blocks(nbytes)
        if not self._fits(need) or need > self.pool.layout.max_blocks_per_buffer:
            return None
        self.pool.create(buf, need)
        self.mapped += need
        self.size[buf] = 0
        self.reserved += need * self.p.block_bytes
        return Growth(need * self.p.block_bytes)

    def grow(self, buf: int, nbytes: int) -> Growth | None:
        extra = self._blocks(nbytes) - len(self.pool.tables[buf])
        if extra <= 0:
            return Growth(0)
        if not self._fits(extra):
            return None
        try:
            self.pool.extend(buf, extra)
        except AllocatorError:  # beyond what the reference's virtual field can address
            return None
        self.mapped += extra
        self.reserved += extra * self.p.block_bytes
        return Growth(extra * self.p.block_bytes)

    def shrink(self, buf: int, nbytes: int) -> int:
        have, keep = len(self.pool.tables[buf]), self._blocks(nbytes)
        if keep >= have:
            return 0
        self.pool.truncate(buf, keep)
        self.mapped -= have - keep
        n = (have - keep) * self.p.block_bytes
        self.reserved -= n
        return n

    def release(self, buf: int) -> int:
        blocks = len(self.pool.tables[buf])
        self.pool.free(buf)
        self.mapped -= blocks
        n = blocks * self.p.block_bytes
        self.used -= self.size.pop(buf)
        self.reserved -= n
        return n

    def block_map(self) -> list[tuple[int, int, int]]:
        """(physical block, buffer or -1, virtual index) for every block."""
        owner = {blk: (b, v) for b, table in self.pool.tables.items() for v, blk in enumerate(table)}
        return [(k, *owner.get(k, (-1, -1))) for k in range(self.pool.layout.blocks)]


def make_storage(p: PolicyParams) -> Storage:
    if p.policy in ("static-single", "static-multi"):
        return StaticStorage(p)
    if p.policy == "realloc-copy":
        return ReallocStorage(p)
    if p.policy == "virtual":
        return VirtualStorage(p)
    raise ValueError(f"unknown memory policy {p.policy!r}; expected one of {POLICIES}")

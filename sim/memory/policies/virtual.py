"""virtual: buffer-level virtualisation (the seed proposal). A buffer is a list of blocks of
``block_bytes`` from a free list, mapped by a block table; it grows and shrinks a block at a
time. allocators' paged block pool keeps the free blocks and block tables; the MU-wide bound
on block-table entries is added here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from allocators.errors import AllocatorError
from allocators.paged import BlockPool, PagedLayout
from mapping.placement import MuRoom
from sim.keys import Field, Issue
from sim.memory.policies import POLICIES, Extent, Growth, MuGeometry, StorageBase, keyed_defaults


def _block_checks(mem: dict) -> list[tuple[str, str]]:
    if mem.get("block_bytes") and mem["block_bytes"] % 64:
        return [("block_bytes", f"{mem['block_bytes']} is not a multiple of 64 bytes (one SRAM row)")]
    return []


@POLICIES.register("virtual")
@dataclass(frozen=True)
class VirtualParams:
    name: str = "virtual"
    block_bytes: int = 4096
    block_table_entries: int = 0  # per MU; 0 = one per block

    KEYS: ClassVar[dict[str, Field]] = {
        "block_bytes": Field("size", 4096, "virtual: block size", min=64),
        "block_table_entries": Field("int", 0, "virtual: block-table entries per MU (0: one per block)", min=0),
    }
    CHECKS = (_block_checks,)

    @classmethod
    def from_config(cls, name: str, memory: dict) -> "VirtualParams":
        return cls(name, **keyed_defaults(cls, memory))

    def layout(self, mu: MuGeometry) -> PagedLayout:
        """allocators' paged layout (raises allocators.errors.InputError if inconsistent)."""
        return PagedLayout(mu.capacity, self.block_bytes, mu.word_bytes, mu.mu_id_bits, mu.buffer_id_bits,
                           mu.virtual_bits)

    def room(self, mu: MuGeometry) -> MuRoom:
        """Whole blocks; a buffer no larger than the reference's virtual field addresses."""
        return MuRoom(mu.capacity, self.block_bytes, 0, self.layout(mu).max_blocks_per_buffer * self.block_bytes)

    def problems(self, mu: MuGeometry) -> list[Issue]:
        try:
            self.layout(mu)
        except ValueError as exc:
            return [Issue("memory.block_bytes", f"{self.block_bytes}: {exc}")]
        return []

    def storage(self, mu: MuGeometry) -> "VirtualStorage":
        return VirtualStorage(self, mu)


class VirtualStorage(StorageBase):
    translates = True
    paged = True

    def __init__(self, p: VirtualParams, mu: MuGeometry):
        super().__init__()
        self.block_bytes = p.block_bytes
        self.pool = BlockPool(p.layout(mu))
        self.entries = p.block_table_entries or self.pool.layout.blocks
        self.mapped = 0  # block-table entries in use, all buffers of the MU

    def _blocks(self, nbytes: int) -> int:
        return -(-nbytes // self.block_bytes)

    def _fits(self, extra: int) -> bool:
        return extra <= len(self.pool.free_blocks) and self.mapped + extra <= self.entries

    def create(self, buf: int, nbytes: int) -> Growth | None:
        need = self._blocks(nbytes)
        if not self._fits(need) or need > self.pool.layout.max_blocks_per_buffer:
            return None
        self.pool.create(buf, need)
        self.mapped += need
        self.size[buf] = 0
        self.reserved += need * self.block_bytes
        return Growth(need * self.block_bytes)

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
        self.reserved += extra * self.block_bytes
        return Growth(extra * self.block_bytes)

    def shrink(self, buf: int, nbytes: int) -> int:
        have, keep = len(self.pool.tables[buf]), self._blocks(nbytes)
        if keep >= have:
            return 0
        self.pool.truncate(buf, keep)
        self.mapped -= have - keep
        n = (have - keep) * self.block_bytes
        self.reserved -= n
        return n

    def release(self, buf: int) -> int:
        blocks = len(self.pool.tables[buf])
        self.pool.free(buf)
        self.mapped -= blocks
        n = blocks * self.block_bytes
        self.used -= self.size.pop(buf)
        self.reserved -= n
        return n

    def extents(self) -> list[Extent]:
        """Every physical block: the buffer and virtual index mapped onto it, or free."""
        owner = {blk: (b, v) for b, table in self.pool.tables.items() for v, blk in enumerate(table)}
        bb = self.block_bytes
        out = []
        for k in range(self.pool.layout.blocks):
            buf, v = owner.get(k, (-1, -1))
            out.append(Extent(k * bb, bb, buf, virtual=v))
        return out

"""virtual: buffer-level virtualisation (the seed proposal). A buffer is a list of blocks of
``block_bytes`` from a free list, mapped by a block table; it grows and shrinks a block at a
time. allocators' paged block pool keeps the free blocks and block tables; the MU-wide bound
on block-table entries is added here.

``spill = "nearest"`` (the proposal's future direction: a buffer's virtual space spread over
several MUs): a buffer's virtual blocks may live on other MUs. The storage keeps, for such a
buffer, which MU holds each virtual block (``LOCAL`` for its own); the MU negotiates the remote
blocks and moves their data (sim/chip/spill.py). ``used`` counts only the bytes in this MU's
own blocks, so every figure counts a block where it physically is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from allocators.errors import AllocatorError
from allocators.paged import BlockPool, PagedLayout
from mapping.placement import MuRoom
from sim.keys import Field, Issue
from sim.memory.policies import (
    POLICIES,
    Extent,
    Footprint,
    Growth,
    MuGeometry,
    PolicyParams,
    StorageBase,
    keyed_defaults,
)

LOCAL = -1  # a virtual block held by the buffer's own MU
BLOCK_STATE_BYTES = 46  # per block of an MU: its free list and block table entries (tracemalloc; numpy 2, CPython 3.11)
SPILLS = ("none", "nearest")


def _block_checks(mem: dict) -> list[tuple[str, str]]:
    if mem.get("block_bytes") and mem["block_bytes"] % 64:
        return [("block_bytes", f"{mem['block_bytes']} is not a multiple of 64 bytes (one SRAM row)")]
    return []


def _spill_checks(mem: dict) -> list[tuple[str, str]]:
    """Only a policy whose block tables can name another MU's blocks (``SPILLING``) can spill."""
    spill, policy = mem.get("spill") or "none", mem.get("policy") or "virtual"
    if spill == "none" or (policy in POLICIES and POLICIES.get(policy).SPILLING):
        return []
    able = " or ".join(n for n, c in POLICIES.items() if c.SPILLING)
    return [("spill", f"{spill} needs memory.policy = {able} (not {policy})")]


@POLICIES.register("virtual")
@dataclass(frozen=True)
class VirtualParams(PolicyParams):
    name: str = "virtual"
    block_bytes: int = 4096
    block_table_entries: int = 0  # per MU; 0 = one per block
    spill: str = "none"  # "nearest": a full MU's buffers grow into the nearest MU with room

    KEYS: ClassVar[dict[str, Field]] = {
        "block_bytes": Field("size", 4096, "virtual: block size", min=64),
        "block_table_entries": Field("int", 0, "virtual: block-table entries per MU (0: one per block)", min=0),
        "spill": Field("choice", "none", "virtual: a buffer whose MU is full grows into blocks of the nearest MU "
                       "with room (by NoC hops, then MU id), or not", choices=SPILLS),
    }
    CHECKS = (_block_checks, _spill_checks)
    SPILLING: ClassVar[bool] = True

    @property
    def spills(self) -> bool:
        return self.spill != "none"

    def footprint(self, mu: MuGeometry) -> Footprint:
        """Its free list and block table: about BLOCK_STATE_BYTES a block (tracemalloc, building one shard)."""
        blocks = mu.capacity // max(self.block_bytes, 1)
        return Footprint(BLOCK_STATE_BYTES * blocks, f"a block table of {blocks:,} blocks")

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
        self.where: dict[int, list[int]] = {}  # spilled buffers: the MU of each virtual block (LOCAL: here)

    def _blocks(self, nbytes: int) -> int:
        return -(-nbytes // self.block_bytes)

    def _fits(self, extra: int) -> bool:
        return extra <= self.room_blocks()

    def room_blocks(self) -> int:
        """Blocks this MU can still map (free blocks and free block-table entries)."""
        return min(len(self.pool.free_blocks), self.entries - self.mapped)

    def blocks(self, buf: int) -> int:
        """The buffer's virtual blocks, wherever they are."""
        w = self.where.get(buf)
        return len(w) if w is not None else len(self.pool.tables[buf])

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
        extra = self._blocks(nbytes) - self.blocks(buf)
        if extra <= 0:
            return Growth(0)
        if not self._fits(extra):
            return None
        try:
            self.pool.extend(buf, extra)
        except AllocatorError:  # beyond what the reference's virtual field can address
            return None
        self._mapped_here(buf, extra)
        return Growth(extra * self.block_bytes)

    def _mapped_here(self, buf: int, blocks: int) -> None:
        self.mapped += blocks
        self.reserved += blocks * self.block_bytes
        if buf in self.where:
            self.where[buf] += [LOCAL] * blocks

    # ------------------------------------------------------------------ spilling (sim/chip/spill.py)
    def take(self, buf: int, nbytes: int) -> tuple[int, int]:
        """Map as many of the blocks ``nbytes`` still needs as fit here (creating the buffer if
        new); (bytes reserved, blocks still missing)."""
        have = self.blocks(buf) if buf in self.size else 0
        need = self._blocks(nbytes) - have
        got = max(0, min(need, self.room_blocks()))
        if buf not in self.size:
            self.pool.create(buf, got)
            self.size[buf] = 0
            self.mapped += got
            self.reserved += got * self.block_bytes
        elif got:
            self.pool.extend(buf, got)
            self._mapped_here(buf, got)
        return got * self.block_bytes, max(0, need - got)

    def add_remote(self, buf: int, mu: int, blocks: int) -> None:
        """The buffer's next ``blocks`` virtual blocks are held by MU ``mu``."""
        w = self.where.setdefault(buf, [LOCAL] * len(self.pool.tables[buf]))
        w += [mu] * blocks

    def spilled(self, buf: int) -> bool:
        return buf in self.where

    def remote_blocks(self, buf: int) -> dict[int, int]:
        """Blocks of the buffer each other MU holds."""
        out: dict[int, int] = {}
        for mu in self.where.get(buf, ()):
            if mu != LOCAL:
                out[mu] = out.get(mu, 0) + 1
        return out

    def held(self, buf: int, lo: int, hi: int) -> dict[int, tuple[int, int]]:
        """Where bytes [lo, hi) of the buffer are: per MU (LOCAL: here), the range they occupy
        there, as offsets into that MU's share of the buffer (its blocks in virtual order)."""
        w = self.where.get(buf)
        if w is None:
            return {LOCAL: (lo, hi)} if hi > lo else {}
        bb = self.block_bytes
        out: dict[int, tuple[int, int]] = {}
        seen: dict[int, int] = {}  # blocks of each MU before the current one
        for v, mu in enumerate(w):
            k = seen.get(mu, 0)
            seen[mu] = k + 1
            a, b = max(lo, v * bb), min(hi, (v + 1) * bb)
            if a < b:
                base = k * bb - v * bb  # offset in the MU's share of byte 0 of this block, minus v * bb
                s0, s1 = out.get(mu, (a + base, a + base))
                out[mu] = (min(s0, a + base), max(s1, b + base))
        return out

    def local_bytes(self, buf: int, nbytes: int) -> int:
        """Bytes of the buffer's first ``nbytes`` held in this MU's own blocks."""
        if buf not in self.where:
            return nbytes
        lo, hi = self.held(buf, 0, nbytes).get(LOCAL, (0, 0))
        return hi - lo

    def set_size(self, buf: int, nbytes: int) -> None:
        self.used += self.local_bytes(buf, nbytes) - self.local_bytes(buf, self.size[buf])
        self.size[buf] = nbytes

    def shrink(self, buf: int, nbytes: int) -> int:
        keep = self._blocks(nbytes)
        have = len(self.pool.tables[buf])
        w = self.where.get(buf)
        if w is not None:
            keep = w[:keep].count(LOCAL)
            del w[self._blocks(nbytes):]
        if keep >= have:
            return 0
        self.pool.truncate(buf, keep)
        self.mapped -= have - keep
        n = (have - keep) * self.block_bytes
        self.reserved -= n
        return n

    def release(self, buf: int) -> int:
        blocks = len(self.pool.tables[buf])
        self.used -= self.local_bytes(buf, self.size.pop(buf))
        self.where.pop(buf, None)
        self.pool.free(buf)
        self.mapped -= blocks
        n = blocks * self.block_bytes
        self.reserved -= n
        return n

    def extents(self) -> list[Extent]:
        """Every physical block: the buffer and virtual index mapped onto it, or free."""
        owner = {}
        for b, table in self.pool.tables.items():
            w = self.where.get(b)
            virtual = [v for v, mu in enumerate(w) if mu == LOCAL] if w is not None else range(len(table))
            owner.update({blk: (b, v) for v, blk in zip(virtual, table)})
        bb = self.block_bytes
        out = []
        for k in range(self.pool.layout.blocks):
            buf, v = owner.get(k, (-1, -1))
            out.append(Extent(k * bb, bb, buf, virtual=v))
        return out

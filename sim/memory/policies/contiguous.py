"""Buffers as contiguous regions of an MU's first-fit free list, and fixed-size slots among them:
the storage of the static policies (static_single.py, static_multi.py, on ``StaticSlots``) and
realloc-copy's base."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from allocators.errors import AllocatorError
from allocators.freelist import FreeList
from mapping.placement import MuRoom
from sim.keys import Field, Issue
from sim.memory.policies import Extent, Growth, MuGeometry, PolicyParams, StorageBase, keyed_defaults

BUFFER_BYTES = Field("size", 0, "static-*: buffer size (0: the MU, or MU / buffers_per_mu)", min=0)


@dataclass(frozen=True)
class StaticSlots(PolicyParams):
    """What the static policies share: every buffer takes a whole slot, ``static_buffer_bytes`` or
    else the MU's capacity over ``shares``, and at most ``MAX_BUFFERS`` are held at once (None: as
    many as there are slots)."""

    name: str
    static_buffer_bytes: int = 0  # 0: the MU's capacity over shares

    MAX_BUFFERS: ClassVar[int | None] = None

    @property
    def shares(self) -> int:
        """Slots the MU is cut into when ``static_buffer_bytes`` is 0: one, by default."""
        return 1

    @classmethod
    def from_config(cls, name: str, memory: dict) -> "StaticSlots":
        return cls(name, **keyed_defaults(cls, memory))

    def slot(self, mu: MuGeometry) -> int:
        return self.static_buffer_bytes or mu.capacity // max(1, self.shares)

    def room(self, mu: MuGeometry) -> MuRoom:
        slot = self.slot(mu)
        return MuRoom(mu.capacity, slot, slot, slot, self.MAX_BUFFERS or mu.capacity // slot)

    def problems(self, mu: MuGeometry) -> list[Issue]:
        if self.static_buffer_bytes > mu.capacity:
            return [Issue("memory.static_buffer_bytes", f"{self.static_buffer_bytes} is larger than an MU")]
        return []

    def storage(self, mu: MuGeometry) -> "StaticStorage":
        return StaticStorage(mu, self.slot(mu), self.MAX_BUFFERS)


class ContiguousStorage(StorageBase):
    """Buffers as contiguous regions of a first-fit free list (bottom up, coalescing)."""

    def __init__(self, mu: MuGeometry):
        super().__init__()
        self.capacity = mu.capacity
        self.free_list = FreeList(mu.capacity, alignment=mu.align)
        self.start: dict[int, int] = {}
        self.cap: dict[int, int] = {}

    def _take(self, nbytes: int) -> int | None:
        try:
            return self.free_list.allocate(nbytes)
        except AllocatorError:  # out of memory (or fragmented)
            return None

    def _place(self, buf: int, start: int) -> Growth:
        size = self.free_list.size_of(start)
        self.start[buf], self.cap[buf], self.size[buf] = start, size, 0
        self.reserved += size
        return Growth(size)

    def shrink(self, buf: int, nbytes: int) -> int:
        return 0

    def release(self, buf: int) -> int:
        n = self.cap.pop(buf)
        self.free_list.free(self.start.pop(buf))
        self.used -= self.size.pop(buf)
        self.reserved -= n
        return n

    def external_fragmentation(self) -> float:
        st = self.free_list.statistics()
        return 1.0 - st.largest_free_block / st.free if st.free else 0.0

    def extents(self) -> list[Extent]:
        rows = [Extent(s, self.cap[b], b, self.size[b]) for b, s in self.start.items()]
        rows += [Extent(b.address, b.size, -1) for b in self.free_list.blocks() if not b.allocated]
        return sorted(rows, key=lambda e: e.start)


class StaticStorage(ContiguousStorage):
    """Fixed-size slots: a buffer never grows past its slot; at most ``max_buffers`` at once (None: as
    many slots as the free list holds)."""

    def __init__(self, mu: MuGeometry, slot: int, max_buffers: int | None):
        super().__init__(mu)
        self.slot = slot
        self.max_buffers = max_buffers
    def create(self, buf: int, nbytes: int) -> Growth | None:
        if self.max_buffers is not None and len(self.start) >= self.max_buffers:
            return None
        if nbytes > self.slot:
            return None
        s = self._take(self.slot)
        return None if s is None else self._place(buf, s)

    def grow(self, buf: int, nbytes: int) -> Growth | None:
        return Growth(0) if nbytes <= self.cap[buf] else None

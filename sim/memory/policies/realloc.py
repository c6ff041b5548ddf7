"""realloc-copy: a contiguous reservation; when full, a region ``growth`` times larger is
allocated and the contents copied (both regions live during the copy), like a vector's growth."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mapping.placement import MuRoom
from sim.keys import Field, Issue
from sim.memory.policies import POLICIES, Extent, Growth, MuGeometry, PolicyParams, keyed_defaults
from sim.memory.policies.contiguous import ContiguousStorage


@POLICIES.register("realloc-copy")
@dataclass(frozen=True)
class ReallocParams(PolicyParams):
    name: str = "realloc-copy"
    initial_bytes: int = 4096  # first reservation (at least the initial size)
    growth: float = 2.0

    KEYS: ClassVar[dict[str, Field]] = {
        "initial_bytes": Field("size", 4096, "realloc-copy: first reservation (at least the initial size)", min=64),
        "growth": Field("float", 2.0, "realloc-copy: growth factor", min=1.01),
    }

    @classmethod
    def from_config(cls, name: str, memory: dict) -> "ReallocParams":
        return cls(name, **keyed_defaults(cls, memory))

    def room(self, mu: MuGeometry) -> MuRoom:
        """Regions start on SRAM rows; the first reservation is at least initial_bytes."""
        return MuRoom(mu.capacity, mu.align, self.initial_bytes)

    def problems(self, mu: MuGeometry) -> list[Issue]:
        return []

    def storage(self, mu: MuGeometry) -> "ReallocStorage":
        return ReallocStorage(self, mu)


class ReallocStorage(ContiguousStorage):
    def __init__(self, p: ReallocParams, mu: MuGeometry):
        super().__init__(mu)
        self.p = p
        self.old: dict[int, int] = {}  # old region start -> size, until its copy finishes

    def create(self, buf: int, nbytes: int) -> Growth | None:
        s = self._take(max(nbytes, self.p.initial_bytes))
        return None if s is None else self._place(buf, s)

    def grow(self, buf: int, nbytes: int) -> Growth | None:
        cap = self.cap[buf]
        if nbytes <= cap:
            return Growth(0)
        s = self._take(max(nbytes, int(cap * self.p.growth)))
        if s is None:
            return None
        size = self.free_list.size_of(s)
        old = self.start[buf]
        self.old[old] = cap
        self.start[buf], self.cap[buf] = s, size
        self.reserved += size
        return Growth(size, copy_bytes=self.size[buf], old_start=old)

    def copy_done(self, old_start: int) -> int:
        n = self.old.pop(old_start)
        self.free_list.free(old_start)
        self.reserved -= n
        return n

    def extents(self) -> list[Extent]:
        rows = super().extents() + [Extent(s, n, -2, n) for s, n in self.old.items()]
        return sorted(rows, key=lambda e: e.start)

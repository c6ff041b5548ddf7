"""A system's inter-chip network as nodes and links: the topology a System describes, expanded.

Chips are numbered with the first network dimension varying fastest (chip = c0 + s0 * (c1
+ s1 * c2)). Each dimension joins the chips that differ only in its coordinate: a ring
links each chip to its two neighbours (one link each way; a ring of two is one pair of
links), a fully connected dimension links every pair both ways, a switch is a node of its
own linked both ways to each chip of its group. Routes are dimension-ordered (the first
dimension first): the shorter way round a ring (ties go the + way), straight across a
full connection, up to the group's switch and down. Links carry the dimension's
bandwidth and latency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mapping.systems import LinkKind, System


@dataclass(frozen=True)
class SystemLink:
    src: int  # node ids: chips first, then switches
    dst: int
    bandwidth: float  # bytes/s
    latency: float  # seconds
    dim: int


@dataclass(frozen=True)
class SystemGraph:
    chips: int
    sizes: tuple[int, ...]
    kinds: tuple[LinkKind, ...]
    switches: int
    links: tuple[SystemLink, ...]
    link_of: dict[tuple[int, int], int]  # (src node, dst node) -> link index
    switch_of: dict[tuple[int, int], int]  # (dimension, group's first chip) -> switch node

    @property
    def nodes(self) -> int:
        return self.chips + self.switches

    def coords(self, chip: int) -> list[int]:
        out = []
        for s in self.sizes:
            out.append(chip % s)
            chip //= s
        return out

    def chip_at(self, coords: list[int]) -> int:
        chip, stride = 0, 1
        for c, s in zip(coords, self.sizes):
            chip += c * stride
            stride *= s
        return chip

    def group(self, chip: int, dim: int) -> list[int]:
        """The chips that differ from ``chip`` only along ``dim``, in coordinate order."""
        c = self.coords(chip)
        return [self.chip_at(c[:dim] + [i] + c[dim + 1:]) for i in range(self.sizes[dim])]

    def route(self, src: int, dst: int) -> list[int]:
        """Link indices from chip ``src`` to chip ``dst``, dimension by dimension."""
        path: list[int] = []
        cur = self.coords(src)
        goal = self.coords(dst)
        for d, (size, kind) in enumerate(zip(self.sizes, self.kinds)):
            if cur[d] == goal[d]:
                continue
            here = self.chip_at(cur)
            there = self.chip_at(cur[:d] + [goal[d]] + cur[d + 1:])
            if kind is LinkKind.FULLY_CONNECTED:
                path.append(self.link_of[here, there])
            elif kind is LinkKind.SWITCH:
                sw = self.switch_of[d, self.group(here, d)[0]]
                path += [self.link_of[here, sw], self.link_of[sw, there]]
            else:
                fwd = (goal[d] - cur[d]) % size
                step = 1 if fwd <= size - fwd else -1
                while cur[d] != goal[d]:
                    a = self.chip_at(cur)
                    cur[d] = (cur[d] + step) % size
                    path.append(self.link_of[a, self.chip_at(cur)])
            cur[d] = goal[d]
        return path


def system_graph(system: System) -> SystemGraph:
    """The nodes and links of ``system``'s network (every dimension's size must be fixed)."""
    sizes = tuple(d.size for d in system.network)
    if any(s < 1 for s in sizes):
        raise ValueError("every network dimension needs a size to build the system's links")
    chips = int(np.prod(sizes))
    if chips != system.chips:
        raise ValueError(f"network {'x'.join(map(str, sizes))} has {chips} chips, the system {system.chips}")
    links: list[SystemLink] = []
    link_of: dict[tuple[int, int], int] = {}
    switch_of: dict[tuple[int, int], int] = {}
    graph = SystemGraph(chips, sizes, tuple(d.kind for d in system.network), 0, (), {}, {})

    def add(a: int, b: int, dim: int) -> None:
        if a != b and (a, b) not in link_of:
            d = system.network[dim]
            link_of[a, b] = len(links)
            links.append(SystemLink(a, b, d.link_bandwidth, d.link_latency, dim))

    switches = 0
    for dim, d in enumerate(system.network):
        if d.size == 1:
            continue
        for chip in range(chips):
            group = graph.group(chip, dim)
            if group[0] != chip:
                continue  # each group once, from its first chip
            if d.kind is LinkKind.SWITCH:
                sw = chips + switches
                switches += 1
                switch_of[dim, chip] = sw
                for c in group:
                    add(c, sw, dim)
                    add(sw, c, dim)
            elif d.kind is LinkKind.FULLY_CONNECTED:
                for a in group:
                    for b in group:
                        add(a, b, dim)
            else:
                for i, a in enumerate(group):
                    add(a, group[(i + 1) % d.size], dim)
                    add(a, group[(i - 1) % d.size], dim)
    return SystemGraph(chips, sizes, graph.kinds, switches, tuple(links), link_of, switch_of)

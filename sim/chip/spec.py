"""Where the units of a chip sit: the layout of a ChipSpec's grid (mapping/chips.py describes
the chip and its presets once, for the mapper and the simulator alike).

Tile (r, c) holds a compute unit (CU) when r + c is even and a memory unit (MU) when it
is odd (Plasticine's checkerboard, Prabhakar et al., ISCA 2017). DRAM interface units
sit on the tiles of the left and right edge columns, sharing the tile's router and
network interface with the tile's CU or MU; a chip with memory tiers (HBM, DDR) has one
controller unit per tier instead, mid-height on its edge. Unit ids: tile id (row * cols +
col) for the CU/MU of a tile, ``tiles + k`` for the k-th DRAM interface unit (left edge top
to bottom, then right edge) or the k-th tier's controller. A chip of a system has one
inter-chip network interface (IO) unit per network dimension, after the DRAM units:
dimension 0's in the middle of the top edge, 1's in the middle of the bottom edge, 2's a
quarter along the top edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mapping.chips import RDA_PRESETS as PRESETS
from mapping.chips import ChipSpec

CU, MU, DRAM, IO = 0, 1, 2, 3
KIND_NAMES = ("CU", "MU", "DRAM", "IO")


@dataclass(frozen=True)
class UnitLayout:
    """Where every unit is: kind and tile of each unit id, and the ids of each kind."""

    kind: np.ndarray  # per unit: CU, MU, DRAM or IO
    tile: np.ndarray  # per unit: tile id of its router
    cus: np.ndarray
    mus: np.ndarray
    drams: np.ndarray
    ios: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # one per network dimension

    @property
    def units(self) -> int:
        return len(self.kind)


def io_tiles(spec: ChipSpec, ports: int) -> list[int]:
    """Tiles of the IO units of a chip with ``ports`` network dimensions (at most 3)."""
    spots = [(0, spec.cols // 2), (spec.rows - 1, spec.cols // 2), (0, spec.cols // 4)]
    if ports > len(spots):
        raise ValueError(f"a chip has IO units for at most {len(spots)} network dimensions, not {ports}")
    return [r * spec.cols + c for r, c in spots[:ports]]


def unit_layout(spec: ChipSpec, io_ports: int = 0) -> UnitLayout:
    kind = np.full(spec.tiles, MU)
    kind[spec.cu_tiles()] = CU
    tiles = np.arange(spec.tiles)
    edge = spec.dram_tiles()
    io = io_tiles(spec, io_ports)
    all_kind = np.concatenate([kind, np.full(len(edge), DRAM), np.full(len(io), IO)])
    all_tile = np.concatenate([tiles, edge, np.array(io, dtype=np.int64)])
    ids = np.arange(len(all_kind))
    return UnitLayout(all_kind, all_tile, ids[all_kind == CU], ids[all_kind == MU], ids[all_kind == DRAM],
                      ids[all_kind == IO])


def home_drams(spec: ChipSpec, lay: UnitLayout) -> np.ndarray:
    """Per unit id, the DRAM interface unit of each MU (-1 for other units): the nearer edge of
    its own row (where it evicts and swaps to); on a chip with tiers, the first tier's."""
    cols = spec.cols
    home = np.full(lay.units, -1, dtype=np.int64)
    if spec.tiers:
        home[lay.mus] = int(lay.drams[0])
        return home
    dtile = lay.tile[lay.drams]
    for uid in lay.mus.tolist():
        r, c = divmod(int(lay.tile[uid]), cols)
        edge = r * cols + (0 if c < cols - c - 1 else cols - 1)
        home[uid] = int(lay.drams[np.flatnonzero(dtile == edge)[0]])
    return home


def dram_units(spec: ChipSpec) -> list[int]:
    """The units a workload's DRAM traffic is spread over: every DRAM interface, or the first
    tier's controller (the chip's DRAM) on a chip with tiers."""
    first = spec.tiles
    return [first] if spec.tiers else list(range(first, first + spec.dram_units))


def tier_unit(spec: ChipSpec, name: str) -> int:
    """Unit id of tier ``name``'s controller (KeyError naming the chip's tiers)."""
    return spec.tiles + spec.tier_index(name)


def unit_name(spec: ChipSpec, lay: UnitLayout, uid: int) -> str:
    t = int(lay.tile[uid])
    kind = int(lay.kind[uid])
    if kind == DRAM and spec.tiers:
        return f"{spec.tiers[uid - spec.tiles].name.upper()} ({t // spec.cols},{t % spec.cols})"
    return f"{KIND_NAMES[kind]} ({t // spec.cols},{t % spec.cols})"


__all__ = ["CU", "DRAM", "IO", "KIND_NAMES", "MU", "PRESETS", "ChipSpec", "UnitLayout", "dram_units", "home_drams",
           "io_tiles", "tier_unit", "unit_layout", "unit_name"]

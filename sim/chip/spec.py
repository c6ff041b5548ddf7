"""Where the units of a chip sit: the layout of a ChipSpec's grid (mapping/chips.py describes
the chip and its presets once, for the mapper and the simulator alike).

Tile (r, c) holds a compute unit (CU) when r + c is even and a memory unit (MU) when it
is odd (Plasticine's checkerboard, Prabhakar et al., ISCA 2017). DRAM interface units
sit on the tiles of the left and right edge columns, sharing the tile's router and
network interface with the tile's CU or MU. Unit ids: tile id (row * cols + col) for
the CU/MU of a tile, ``tiles + k`` for the k-th DRAM interface unit (left edge top to
bottom, then right edge).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mapping.chips import RDA_PRESETS as PRESETS
from mapping.chips import ChipSpec

CU, MU, DRAM = 0, 1, 2
KIND_NAMES = ("CU", "MU", "DRAM")


@dataclass(frozen=True)
class UnitLayout:
    """Where every unit is: kind and tile of each unit id, and the ids of each kind."""

    kind: np.ndarray  # per unit: CU, MU or DRAM
    tile: np.ndarray  # per unit: tile id of its router
    cus: np.ndarray
    mus: np.ndarray
    drams: np.ndarray

    @property
    def units(self) -> int:
        return len(self.kind)


def unit_layout(spec: ChipSpec) -> UnitLayout:
    kind = np.full(spec.tiles, MU)
    kind[spec.cu_tiles()] = CU
    tiles = np.arange(spec.tiles)
    edge = spec.dram_tiles()
    all_kind = np.concatenate([kind, np.full(len(edge), DRAM)])
    all_tile = np.concatenate([tiles, edge])
    ids = np.arange(len(all_kind))
    return UnitLayout(all_kind, all_tile, ids[all_kind == CU], ids[all_kind == MU], ids[all_kind == DRAM])


def unit_name(spec: ChipSpec, lay: UnitLayout, uid: int) -> str:
    t = int(lay.tile[uid])
    return f"{KIND_NAMES[int(lay.kind[uid])]} ({t // spec.cols},{t % spec.cols})"


__all__ = ["CU", "DRAM", "KIND_NAMES", "MU", "PRESETS", "ChipSpec", "UnitLayout", "unit_layout", "unit_name"]

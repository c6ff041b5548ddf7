"""The chip: a grid of tiles, each a router plus a unit, and its presets.

Tile (r, c) holds a compute unit (CU) when r + c is even and a memory unit (MU) when it
is odd (Plasticine's checkerboard, Prabhakar et al., ISCA 2017). DRAM interface units
sit on the tiles of the left and right edge columns, sharing the tile's router and
network interface with the tile's CU or MU. Unit ids: tile id (row * cols + col) for
the CU/MU of a tile, ``tiles + k`` for the k-th DRAM interface unit (left edge top to
bottom, then right edge).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

CU, MU, DRAM = 0, 1, 2
KIND_NAMES = ("CU", "MU", "DRAM")


@dataclass(frozen=True)
class ChipSpec:
    """Sizes in bytes, times in cycles of ``clock_hz``."""

    name: str = "plasticine"
    rows: int = 8
    cols: int = 16
    clock_hz: float = 1e9
    flit_bits: int = 512
    vcs: int = 4
    vc_buffers: int = 4
    cu_lanes: int = 16
    cu_stages: int = 6
    mu_bytes: int = 256 * 1024
    mu_banks: int = 16
    mu_word_bytes: int = 4
    mu_access_latency: int = 2  # cycles from a request's service start to its first word
    translation_latency: int = 2  # block-table lookup per access (virtual policy only)
    dram_bytes_per_cycle: int = 8  # per DRAM interface unit
    dram_latency: int = 100

    @property
    def tiles(self) -> int:
        return self.rows * self.cols

    @property
    def mu_bytes_per_cycle(self) -> int:
        """One word per bank per cycle."""
        return self.mu_banks * self.mu_word_bytes

    @property
    def cu_flops_per_cycle(self) -> int:
        """Each functional unit (lane x stage) retires one fused multiply-add (2 FLOP) per cycle."""
        return 2 * self.cu_lanes * self.cu_stages

    @property
    def flit_bytes(self) -> int:
        return self.flit_bits // 8

    def with_(self, **changes) -> "ChipSpec":
        return replace(self, **changes)

    def problems(self) -> list[str]:
        out = []
        if self.rows < 1 or self.cols < 2:
            out.append(f"a {self.rows}x{self.cols} grid needs at least one row and two columns (a CU and an MU)")
        if self.flit_bits < 64 or self.flit_bits % 8:
            out.append(f"flit_bits {self.flit_bits} must be a multiple of 8 and at least 64")
        for name in ("cu_lanes", "cu_stages", "mu_bytes", "mu_banks", "mu_word_bytes", "dram_bytes_per_cycle"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be at least 1")
        return out


PRESETS = {
    # Plasticine (ISCA 2017): 16 x 8 tiles, 64 PCUs of 16 lanes x 6 stages, 64 PMUs of 256 KiB
    # in 16 banks, 1 GHz; 512-bit (16-word) vector network, 4 VCs
    "plasticine": ChipSpec(),
    # SN40L-like (Prabhakar et al., IEEE Micro 2024): 1,040 PCUs and 1,040 PMUs, 520 MB of
    # SRAM (about 0.5 MB each), 1.6 GHz; 40 x 52 tiles, 32-lane PCUs; DRAM edge bandwidth
    # scaled to 1.6 TB/s of HBM over 80 edge interfaces (12.5 B/cycle, rounded to 12)
    "sn40l-like": ChipSpec(name="sn40l-like", rows=40, cols=52, clock_hz=1.6e9, cu_lanes=32, cu_stages=6,
                           mu_bytes=512 * 1024, mu_banks=32, dram_bytes_per_cycle=12, dram_latency=160),
}


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
    rows, cols = spec.rows, spec.cols
    tiles = np.arange(spec.tiles)
    r, c = tiles // cols, tiles % cols
    kind = np.where((r + c) % 2 == 0, CU, MU)
    edge = np.concatenate([np.arange(rows) * cols, np.arange(rows) * cols + cols - 1])
    all_kind = np.concatenate([kind, np.full(len(edge), DRAM)])
    all_tile = np.concatenate([tiles, edge])
    ids = np.arange(len(all_kind))
    return UnitLayout(all_kind, all_tile, ids[all_kind == CU], ids[all_kind == MU], ids[all_kind == DRAM])


def unit_name(spec: ChipSpec, lay: UnitLayout, uid: int) -> str:
    t = int(lay.tile[uid])
    return f"{KIND_NAMES[int(lay.kind[uid])]} ({t // spec.cols},{t % spec.cols})"

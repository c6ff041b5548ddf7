"""Chips, described once: an RDA's grid of tiles (``ChipSpec``) and the roofline figures
DFModel reads (``Chip``), derived from the grid for every RDA preset.

``ChipSpec`` is what the simulator builds (sim/chip): rows x cols tiles, each a router plus a
compute unit (CU) or memory unit (MU) in a checkerboard (Plasticine, Prabhakar et al., ISCA
2017), DRAM interfaces on the left and right edge tiles, the NoC's flit width and buffers.
``Chip`` is DFModel's view of any accelerator (cores of width x height MACs, SRAM, DRAM
bandwidth and capacity). For an RDA, ``ChipSpec.dfmodel()`` derives it: cores = CUs, width x
height = lanes x stages, SRAM = MUs x scratchpad, DRAM bandwidth = interfaces x bytes/cycle x
clock. GPUs and other chips DFModel maps onto have no grid here and are given as ``Chip``
directly (mapping/systems.py). Units: bytes, Hz, bytes/s, FLOP/s; sizes of a ChipSpec in
bytes and times in cycles of its clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

MiB = 2**20


@dataclass(frozen=True)
class Chip:
    """One accelerator as DFModel sees it: ``cores`` compute units of ``width`` x ``height`` MACs."""

    name: str
    cores: int
    width: int  # systolic width (lanes)
    height: int  # systolic height (stages)
    frequency: float  # Hz
    sram_bytes: float
    dram_bandwidth: float  # bytes/s
    dram_bytes: float  # capacity; inf when unlimited

    @property
    def peak_flops(self) -> float:
        # DFModel: GFLOPS = 2 * W * H * cores * freq
        return 2.0 * self.width * self.height * self.cores * self.frequency


@dataclass(frozen=True)
class TierSpec:
    """An off-chip memory tier of a chip (HBM, DDR): capacity, bandwidth, latency and the page
    its allocator hands out. Its channels are interleaved (a stream spreads over all of them),
    so the tier is one bandwidth every transfer shares; its controller sits on one edge tile
    (``edge``: "left" or "right", mid-height) and data enters the grid through a port on every
    tile of that side's edge column."""

    name: str  # also its component in the energy table ("hbm", "ddr")
    capacity: float  # bytes
    bandwidth: float  # bytes/s, every channel together
    latency: float  # seconds from a request reaching the controller to its first byte
    page_bytes: int = 2 * MiB  # allocation granule (paged blocks)
    edge: str = "left"
    # bytes/s through each row's port into the grid; 0: the edge tile's interface link (a real
    # chip's edge). An abstract machine whose memory reaches every unit at the unit's own rate
    # (STeP's) gives it the tier's bandwidth, so no row's port is the bottleneck.
    port_bandwidth: float = 0.0

    def bytes_per_cycle(self, clock_hz: float) -> float:
        return self.bandwidth / clock_hz

    def latency_cycles(self, clock_hz: float) -> int:
        return int(round(self.latency * clock_hz))

    def problems(self) -> list[str]:
        out = []
        for name in ("capacity", "bandwidth", "page_bytes"):
            if not getattr(self, name) > 0:
                out.append(f"tier {self.name}: {name} must be positive")
        if self.latency < 0:
            out.append(f"tier {self.name}: latency must not be negative")
        if self.port_bandwidth < 0:
            out.append(f"tier {self.name}: port_bandwidth must not be negative (0: the edge link's rate)")
        if 0 < self.capacity < self.page_bytes:
            out.append(f"tier {self.name}: its capacity ({self.capacity:,.0f} B) holds no page of "
                       f"{self.page_bytes:,} B")
        if self.edge not in ("left", "right"):
            out.append(f"tier {self.name}: edge {self.edge!r} must be \"left\" or \"right\"")
        return out


@dataclass(frozen=True)
class ChipSpec:
    """A reconfigurable dataflow accelerator tile by tile (sizes in bytes, times in cycles)."""

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
    dram_bytes_per_cycle: int = 3  # per DRAM interface unit
    dram_latency: int = 100
    dram_bytes: float = 16 * 2**30  # capacity of the chip's DRAM
    # off-chip memory tiers (HBM, DDR), the first one the chip's DRAM; none: DRAM interface
    # units on the edges (dram_bytes_per_cycle, dram_latency, dram_bytes above)
    tiers: tuple[TierSpec, ...] = ()

    @property
    def tiles(self) -> int:
        return self.rows * self.cols

    @property
    def cu_count(self) -> int:
        """Tiles with r + c even hold a CU: ceil(tiles / 2) of them."""
        return (self.tiles + 1) // 2

    @property
    def mu_count(self) -> int:
        return self.tiles // 2

    @property
    def dram_units(self) -> int:
        """One DRAM interface on every tile of the left and right edge columns, or one
        controller per memory tier."""
        return len(self.tiers) if self.tiers else 2 * self.rows

    def tier_index(self, name: str) -> int:
        """Position of tier ``name`` (KeyError naming the chip's tiers)."""
        for i, t in enumerate(self.tiers):
            if t.name == name:
                return i
        known = ", ".join(t.name for t in self.tiers) or "none"
        raise KeyError(f"chip {self.name!r} has no memory tier {name!r} (its tiers: {known})")

    def cu_tiles(self) -> np.ndarray:
        """Tile ids (row * cols + col) holding a CU: r + c even (the checkerboard)."""
        t = np.arange(self.tiles)
        return t[(t // self.cols + t % self.cols) % 2 == 0]

    def mu_tiles(self) -> np.ndarray:
        """Tile ids holding an MU: r + c odd."""
        t = np.arange(self.tiles)
        return t[(t // self.cols + t % self.cols) % 2 == 1]

    def dram_tiles(self) -> np.ndarray:
        """Tiles of the DRAM interfaces: the left edge top to bottom, then the right edge; or
        each tier's controller, mid-height on its edge."""
        if self.tiers:
            mid = (self.rows // 2) * self.cols
            return np.array([mid + (0 if t.edge == "left" else self.cols - 1) for t in self.tiers], dtype=np.int64)
        rows = np.arange(self.rows) * self.cols
        return np.concatenate([rows, rows + self.cols - 1])

    def port_tiles(self, tier: int) -> np.ndarray:
        """Edge tiles through which tier ``tier``'s data enters the grid, top to bottom."""
        col = 0 if self.tiers[tier].edge == "left" else self.cols - 1
        return np.arange(self.rows) * self.cols + col

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

    @property
    def dram_bandwidth(self) -> float:
        """Bytes/s over every DRAM interface (the first tier's, for a chip with tiers)."""
        if self.tiers:
            return self.tiers[0].bandwidth
        return self.dram_units * self.dram_bytes_per_cycle * self.clock_hz

    @property
    def dram_capacity(self) -> float:
        """Bytes of the chip's DRAM (the first tier's, for a chip with tiers)."""
        return self.tiers[0].capacity if self.tiers else self.dram_bytes

    def with_(self, **changes) -> "ChipSpec":
        return replace(self, **changes)

    def dfmodel(self) -> Chip:
        """The chip as DFModel's roofline sees it (mapping/)."""
        return Chip(self.name, self.cu_count, self.cu_lanes, self.cu_stages, self.clock_hz,
                    float(self.mu_count * self.mu_bytes), float(self.dram_bandwidth), float(self.dram_capacity))

    def problems(self) -> list[str]:
        out = []
        if self.rows < 1 or self.cols < 2:
            out.append(f"a {self.rows}x{self.cols} grid needs at least one row and two columns (a CU and an MU)")
        if self.flit_bits < 64 or self.flit_bits % 8:
            out.append(f"flit_bits {self.flit_bits} must be a multiple of 8 and at least 64")
        for name in ("cu_lanes", "cu_stages", "mu_bytes", "mu_banks", "mu_word_bytes", "dram_bytes_per_cycle"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be at least 1")
        names = [t.name for t in self.tiers]
        if len(set(names)) != len(names):
            out.append(f"tier names {names} repeat")
        for t in self.tiers:
            out += t.problems()
        return out


RDA_PRESETS = {
    # Plasticine (ISCA 2017): 16 x 8 tiles, 64 PCUs of 16 lanes x 6 stages, 64 PMUs of 256 KiB
    # in 16 banks, 1 GHz; 512-bit (16-word) vector network, 4 VCs; DDR3 at 49 GB/s in the
    # paper, here 3 B/cycle on each of 16 edge interfaces (48 GB/s); 16 GiB is an assumption
    "plasticine": ChipSpec(),
    # SN40L-like (Prabhakar et al., IEEE Micro 2024): 1,040 PCUs and 1,040 PMUs at 1.6 GHz,
    # 520 MB of SRAM in the paper (here 512 KiB per PMU: 545 MB), 40 x 52 tiles, 32-lane
    # PCUs; 64 GB of HBM at 1.6 TB/s, here 12 B/cycle on each of 80 edge interfaces (1.536 TB/s)
    "sn40l-like": ChipSpec(name="sn40l-like", rows=40, cols=52, clock_hz=1.6e9, cu_lanes=32, cu_stages=6,
                           mu_bytes=512 * 1024, mu_banks=32, dram_bytes_per_cycle=12, dram_latency=160,
                           dram_bytes=64e9),
    # SN40L from its published figures. Prabhakar et al., "SambaNova SN40L: Scaling the AI
    # Memory Wall with Dataflow and Composition of Experts", MICRO 2024 (arXiv 2405.07518), and
    # Hot Chips 2024: 1,040 PCUs and 1,040 PMUs (here the 40 x 52 checkerboard); 520 MB of
    # on-chip SRAM = 1,040 x 512 KiB (the "MB" is MiB); 638 BF16 TFLOPS; 64 GB of HBM at about
    # 1.6 TB/s and 1.5 TB of DDR at about 100 GB/s per socket (the 16-socket node: 1 TB of HBM
    # at 25.6 TB/s, 24 TB of DDR at 1.6 TB/s). Not published, chosen: 1.6 GHz and 32 lanes x
    # 6 stages (1,040 x 32 x 6 x 2 FLOP x 1.6 GHz = 639 TFLOPS, the published 638); PMU banks
    # as sn40l-like (32 x 4 B); HBM latency 100 ns, DDR 150 ns; 2 MiB pages. Unlike sn40l-like
    # (80 edge DRAM interfaces of 12 B/cycle, 1.536 TB/s, every transfer in packets) it has
    # two tiers, each one controller with interleaved channels whose transfers are flows
    # (sim/flows) sharing the tier's bandwidth; docs/run.md, "What is assumed at real scale".
    "sn40l": ChipSpec(name="sn40l", rows=40, cols=52, clock_hz=1.6e9, cu_lanes=32, cu_stages=6,
                      mu_bytes=512 * 1024, mu_banks=32, dram_latency=160, dram_bytes=64e9,
                      tiers=(TierSpec("hbm", 64e9, 1.6e12, 100e-9, edge="left"),
                             TierSpec("ddr", 1.5e12, 100e9, 150e-9, edge="right"))),
    # STeP's abstract machine (Sohn et al., "Streaming Tensor Programs", ASPLOS 2026, arXiv
    # 2511.07776; its artifact stanford-ppl/step_artifact), given as rates, in cycles of a 1 GHz
    # clock: off-chip memory 1,024 B/cycle (HBMConfig(64, 32, 2, 2, 1, 14): 32 channels of one
    # 64-byte request every 2 cycles), first byte 16 cycles after a request (latency 2 + start-up
    # 14); on chip 64 B/cycle per unit (here a 520-bit flit: 2 KiB of data in 32 flits, a link's
    # data rate is 64 B/cycle, and an MU's 16 banks x 4 B); 4,096 FLOP/cycle per operator for the
    # MoE (64 lanes x 32 stages; its attention sets 2,048: chip.cu_stages = 16). The memory reaches
    # every unit at the unit's own rate (port_bandwidth), as STeP's operators do. Not STeP's, chosen:
    # the grid (8 x 8: a workload needing more CUs says so), MUs of 16 MiB (STeP counts on-chip
    # bytes, it does not bound them), 64 GB of HBM (the weights' home).
    "step": ChipSpec(name="step", rows=8, cols=8, clock_hz=1e9, flit_bits=520, cu_lanes=64, cu_stages=32,
                     mu_bytes=16 * MiB, mu_banks=16, mu_word_bytes=4,
                     tiers=(TierSpec("hbm", 64e9, 1.024e12, 16e-9, edge="left", port_bandwidth=1.024e12),)),
}

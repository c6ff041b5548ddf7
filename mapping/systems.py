"""Systems: chips, the inter-chip network (1-3 dimensions) and unit prices/power.

Units are plain SI: bytes, bytes/s, Hz, FLOP/s, dollars, watts. Link prices are per
GB/s and link/switch/DRAM power per GB/s (J/GB), as in DFModel's cost model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from mapping.chips import RDA_PRESETS, Chip

GB = 1e9


class LinkKind(str, Enum):
    RING = "r"
    SWITCH = "sw"
    FULLY_CONNECTED = "fc"


class Parallelism(str, Enum):
    TP = "TP"
    PP = "PP"
    DP = "DP"


@dataclass(frozen=True)
class NetworkDim:
    """One network dimension: ``size`` chips joined by a ring, switch or full connection.

    ``size`` 0 means free: the mapper enumerates it. ``parallelism`` says what it carries.
    """

    kind: LinkKind
    size: int
    link_bandwidth: float  # bytes/s per link
    parallelism: Parallelism = Parallelism.DP
    link_latency: float = 500e-9  # seconds a byte takes to cross a link (DFModel ignores it; the simulator does not)


@dataclass(frozen=True)
class Prices:
    """Unit prices ($) and power (W, or J/GB for bandwidth-proportional parts)."""

    chip: float = 0.0
    link: float = 0.0  # $ per GB/s of link
    switch: float = 0.0  # $ per GB/s per port
    dram: float = 0.0  # $ per GB/s of DRAM bandwidth
    chip_power: float = 0.0  # W per chip
    link_power: tuple[float, ...] = ()  # J/GB per dimension (x, y, z); missing entries are 0
    switch_power: float = 0.0
    dram_power: float = 0.0


@dataclass(frozen=True)
class System:
    chips: int
    chip: Chip
    network: tuple[NetworkDim, ...]
    prices: Prices = field(default_factory=Prices)

    def __post_init__(self):
        if not 1 <= len(self.network) <= 3:
            raise ValueError("the network needs 1 to 3 dimensions")
        fixed = [d.size for d in self.network]
        if any(s < 0 for s in fixed):
            raise ValueError("network dimension sizes must be >= 0 (0 = free)")
        if all(fixed) and _product(fixed) != self.chips:
            shape = "x".join(map(str, fixed))
            raise ValueError(f"network {shape} has {_product(fixed)} chips, system has {self.chips}")

    @property
    def shape(self) -> str:
        """DFModel's topology name: r_r (2-D torus), r_sw (DGX-1), sw_sw (DGX-2), fc_fc, r_fc, r_r_r..."""
        return "_".join(d.kind.value for d in self.network)

    def with_sizes(self, sizes: tuple[int, ...]) -> "System":
        return replace(self, network=tuple(replace(d, size=s) for d, s in zip(self.network, sizes)))


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


# ---------------------------------------------------------------- chip presets
# Published DFModel chip parameters (see docs/mapping.md for sources).
A100 = Chip("A100", 432, 16, 16, 1.41e9, 88_080_384, 2039 * GB, 80 * 2**30)
H100 = Chip("H100", 528, 16, 16, 1.837e9, 118_489_088, 3350 * GB, 80 * 2**30)
SN30 = Chip("SN30", 1280, 32, 6, 1.25e9, 671_088_640, 300 * GB, 2**40)
WSE2 = Chip("WSE-2", 853_776, 4, 1, 1.1e9, 41_964_011_520, 153 * GB, 1.5 * 2**40)
# The RDAs: derived from their grids (mapping/chips.py), the same chips the simulator runs
PLASTICINE = RDA_PRESETS["plasticine"].dfmodel()
SN40L = RDA_PRESETS["sn40l-like"].dfmodel()
SN40L_PUBLISHED = RDA_PRESETS["sn40l"].dfmodel()  # the first tier (HBM) is DFModel's DRAM
STEP = RDA_PRESETS["step"].dfmodel()  # STeP's abstract machine (its HBM is DFModel's DRAM)

CHIPS = {c.name: c for c in (A100, H100, SN30, WSE2, PLASTICINE, SN40L, SN40L_PUBLISHED, STEP)}

# ---------------------------------------------------------------- system presets
# SN40L nodes (Prabhakar et al., MICRO 2024, arXiv 2405.07518; Hot Chips 2024): a node holds 8 or 16
# sockets (the 16-socket node: 1 TB of HBM at 25.6 TB/s = 16 x 64 GB at 1.6 TB/s, 24 TB of DDR at
# 1.6 TB/s = 16 x 1.5 TB at 100 GB/s), joined by "a dedicated inter-RDU network" (MICRO 2024,
# abstract). Its topology, link bandwidth and latency are not given in the sources searched (the
# MICRO and Hot Chips papers, "Kernel Looping", arXiv 2410.23668), so they are CHOSEN here, not
# published: every socket has a direct peer-to-peer link to every other (fully connected, so the
# latency-optimal collectives reach any socket in one hop), a socket injects at 100 GB/s in all and a
# hop's latency is 500 ns. docs/run.md ("What is assumed at real scale") and benchmarks/node_scale.py
# show what decode speed does as each of the three moves.
SN40L_LINK_BANDWIDTH = 100 * GB  # chosen, not published: a socket's peer-to-peer injection bandwidth
SN40L_LINK_LATENCY = 500e-9  # chosen, not published (the mapper's default)
SN40L_NETWORK = LinkKind.FULLY_CONNECTED  # chosen, not published


def sn40l_node(sockets: int, kind: LinkKind = SN40L_NETWORK, bandwidth: float = SN40L_LINK_BANDWIDTH,
               latency: float = SN40L_LINK_LATENCY) -> System:
    """``sockets`` SN40L sockets carrying tensor parallelism over one network dimension."""
    return System(sockets, SN40L_PUBLISHED, (NetworkDim(kind, sockets, bandwidth, Parallelism.TP, latency),))


SYSTEMS = {f"sn40l-{n}": sn40l_node(n) for n in (1, 8, 16)}


def system_preset(name: str) -> System:
    try:
        return SYSTEMS[name]
    except KeyError:
        raise KeyError(f"unknown system preset {name!r}; known: {', '.join(SYSTEMS)}") from None


def network_keys(system: System) -> dict:
    """A system as the keys of a config's [system] (chips, chip, its [[system.network]]), in base units."""
    return {"chips": system.chips, "chip": system.chip.name,
            "network": [{"kind": d.kind.value, "size": d.size, "link_bandwidth": d.link_bandwidth,
                         "link_latency": d.link_latency, "parallelism": d.parallelism.value} for d in system.network]}


def chip(name: str) -> Chip:
    try:
        return CHIPS[name]
    except KeyError:
        raise KeyError(f"unknown chip {name!r}; known: {', '.join(CHIPS)}") from None

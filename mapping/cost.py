"""System cost ($) and power (W) from per-topology link and switch counts (DFModel's cost model).

Links and switches are counted per copy for each named shape (per dimension
``(link GB/s, switch GB/s*ports)`` multipliers); DRAM and chips scale with the chip
count. A single chip needs no links and up to four chips no switch.
"""

from __future__ import annotations

from dataclasses import dataclass

from mapping.systems import GB, System


@dataclass(frozen=True)
class CostBreakdown:
    chips: float
    dram: float
    links: float
    switches: float

    @property
    def total(self) -> float:
        return self.chips + self.dram + self.links + self.switches


def _counts(shape: str, x: int, y: int, z: int, per_copy: int, total: int) -> list[tuple[float, float]]:
    """(link multiplier, switch multiplier) per dimension: multiply by that dimension's GB/s."""
    n = per_copy
    table: dict[str, list[tuple[float, float]]] = {
        "sw": [(n, n)],
        "fc": [(x * (x - 1), 0)],
        "r": [(x, 2)],
        "r_r": [(n, 2 * y), (n, 2 * x)],
        "fc_fc": [(x * (x - 1) * y, 0), (y * (y - 1), y * y)],
        "r_fc": [(n, 2 * y), (y * (y - 1), y * y)],
        "r_sw": [(total, 2 * y), (y, y)],
        "sw_sw": [(total, total), (y, y)],
        "r_r_r": [(n, 2 * y * z), (n, 2 * x * z), (n, 2 * x * y)],
        "r_sw_sw": [(n, 2 * y * z), (y * z, y * z), (z, z)],
        "sw_sw_sw": [(n, n), (y * z, y * z), (z, z)],
    }
    if shape not in table:
        raise ValueError(f"no cost model for topology {shape!r}; known: {', '.join(table)}")
    return table[shape]


def _parts(system: System, copies: int, link_unit: list[float], switch_unit: float,
           chip_unit: float, dram_unit: float) -> CostBreakdown:
    sizes = [d.size for d in system.network] + [1, 1]
    per_copy = system.chips // copies
    counts = _counts(system.shape, sizes[0], sizes[1], sizes[2], per_copy, system.chips)
    links = switches = 0.0
    for dim, (lk, sw), unit in zip(system.network, counts, link_unit):
        bw = dim.link_bandwidth / GB
        links += lk * bw * unit
        switches += sw * bw * switch_unit
    return CostBreakdown(
        chips=system.chips * chip_unit,
        dram=system.chips * system.chip.dram_bandwidth / GB * dram_unit,
        links=links * copies if per_copy > 1 else 0.0,
        switches=switches * copies if per_copy > 4 else 0.0,
    )


def system_cost(system: System, copies: int = 1) -> CostBreakdown:
    p = system.prices
    return _parts(system, copies, [p.link] * 3, p.switch, p.chip, p.dram)


def system_power(system: System, copies: int = 1) -> CostBreakdown:
    p = system.prices
    link = list(p.link_power) + [0.0] * (3 - len(p.link_power))
    return _parts(system, copies, link, p.switch_power, p.chip_power, p.dram_power)

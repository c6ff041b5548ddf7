"""On-chip memory and tier traffic a chip run priced rather than simulated, and how they enter its figures.

A serve run simulates only its scheduler on the grid; each step's time is priced from an anchor,
a plan simulated on the whole chip (sim/workloads/serve/anchors.py). What the steps held in the
MUs and moved through the memory tiers is their anchors' and their own: the run's MU figures
are the steps' (its grid holds nothing else), its tier figures the simulated ones (swaps) plus
the steps'. Applied after the result hash: the summary gains figures, its cycles are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TierTraffic:
    """Bytes a run's priced work read from and wrote to one memory tier, and the flows they took."""

    read_bytes: int = 0
    write_bytes: int = 0
    flows: int = 0


@dataclass(frozen=True)
class PricedMemory:
    """The MU figures of a run's priced work (shares of all the chip's MU bytes, as
    sim/chip/report.py's simulated ones) and its tiers' traffic, by tier name."""

    peak_mu_utilization: float
    mean_mu_utilization: float
    peak_mu_reserved: float
    fragmentation: float
    tiers: dict[str, TierTraffic] = field(default_factory=dict)


def with_priced(summary: dict, priced: PricedMemory | None) -> dict:
    """The summary's memory figures with ``priced`` in them (module docstring), to update it with;
    none without."""
    if priced is None:
        return {}
    out: dict = {"peak_mu_utilization": priced.peak_mu_utilization,
                 "mean_mu_utilization": priced.mean_mu_utilization,
                 "peak_mu_reserved": priced.peak_mu_reserved, "fragmentation": priced.fragmentation,
                 "memory_priced": True}
    for name, t in priced.tiers.items():
        out[f"{name}_read_bytes"] = summary.get(f"{name}_read_bytes", 0) + t.read_bytes
        out[f"{name}_write_bytes"] = summary.get(f"{name}_write_bytes", 0) + t.write_bytes
        out[f"{name}_flows"] = summary.get(f"{name}_flows", 0) + t.flows
    return out

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

    def figures(self, simulated: dict, copies: int = 1) -> dict:
        """The summary's memory figures: the MU figures, and each tier's bytes and flows as
        ``simulated``'s plus ``copies`` times the priced ones (a node's chips each move their slice's)."""
        out: dict = {"peak_mu_utilization": self.peak_mu_utilization, "mean_mu_utilization": self.mean_mu_utilization,
                     "peak_mu_reserved": self.peak_mu_reserved, "fragmentation": self.fragmentation}
        for name, t in self.tiers.items():
            for key, priced in (("read_bytes", t.read_bytes), ("write_bytes", t.write_bytes), ("flows", t.flows)):
                out[f"{name}_{key}"] = simulated.get(f"{name}_{key}", 0) + copies * priced
        return out


def with_priced(summary: dict, priced: PricedMemory | None) -> dict:
    """The summary's memory figures with ``priced`` in them (module docstring), to update it with;
    none without."""
    return {} if priced is None else {**priced.figures(summary), "memory_priced": True}

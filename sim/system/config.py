"""Everything one system simulation needs (plain frozen data, picklable for Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from mapping.systems import System
from mapping.topology import SystemGraph, system_graph
from sim.chip.config import ChipConfig, SystemPlace
from sim.chip.spec import unit_layout
from sim.cycles import NEVER
from sim.system.network import SystemNet

if TYPE_CHECKING:
    from sim.system.shard import SystemShard


@dataclass(frozen=True)
class Fidelity:
    """What a chip of a system is, and what that asks of the run that simulates it."""

    name: str
    doc: str
    # each chip is its whole CU/MU grid and NoC (sim/system/grid.py): summarised as a run of
    # its own, its memory references checked by the shadow oracle across chips
    grid: bool

    def lookahead_links(self, net: SystemNet, owner: np.ndarray) -> list[int]:
        """The links whose least latency bounds an epoch: those between shards (``owner``:
        node -> shard); every link for grid chips, which run an epoch ahead of the network
        inside a shard too."""
        if self.grid:
            return list(range(len(net.links)))
        return [i for i, lk in enumerate(net.links) if owner[lk.src] != owner[lk.dst]]

    def shard(self, cfg: SystemConfig, nodes: list[int], owner: np.ndarray) -> SystemShard:
        """The shard simulating ``nodes``: grid chips run their own configurations, box chips
        the system workload's program."""
        from sim.system.shard import SystemShard  # the chips' simulators: loaded when a run builds a shard

        if self.grid:
            return SystemShard(cfg.net(), nodes, None, owner, grid=cfg.chip_config)
        return SystemShard(cfg.net(), nodes, cfg.workload.system_program(cfg), owner)


FIDELITY = {f.name: f for f in (
    Fidelity("box", "a chip is its mapped partitions' times behind its network interface (cheap: 1,000s of "
             "chips)", grid=False),
    Fidelity("grid", "a chip is its whole CU/MU grid and NoC running a chip workload", grid=True),
)}
FIDELITIES = tuple(FIDELITY)


@dataclass(frozen=True)
class SystemConfig:
    system: System
    clock_hz: float  # the chips' clock: the simulation's cycle
    packet_bytes: int  # messages cross links in packets of this size
    fidelity: str
    workload: Any  # box: a system workload's parameters (sim/system/programs.py); grid: a chip workload's
    seed: int = 1
    max_cycles: int = NEVER
    chip: ChipConfig | None = None  # grid fidelity: every chip's configuration (its place aside)
    graph: SystemGraph = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "graph", system_graph(self.system))
        if self.fidelity not in FIDELITIES:
            raise ValueError(f"fidelity {self.fidelity!r}: expected one of {', '.join(FIDELITIES)}")
        if self.level.grid and self.chip is None:
            raise ValueError("grid fidelity needs the chip's configuration")

    @property
    def level(self) -> Fidelity:
        """What ``fidelity`` asks of the run."""
        return FIDELITY[self.fidelity]

    def net(self) -> SystemNet:
        return SystemNet(self.graph, self.clock_hz, self.packet_bytes)

    def place(self, cid: int) -> SystemPlace:
        """Chip ``cid``'s place: its groups along each dimension and the IO unit towards every chip."""
        g = self.graph
        assert self.chip is not None
        ios = unit_layout(self.chip.spec, len(g.sizes)).ios.tolist()
        egress = tuple(-1 if d == cid else ios[g.links[g.route(cid, d)[0]].dim] for d in range(g.chips))
        groups = tuple(tuple(g.group(cid, d)) for d in range(len(g.sizes)))
        return SystemPlace(cid, g.chips, egress, groups, tuple(d.parallelism.value for d in self.system.network))

    def chip_config(self, cid: int) -> ChipConfig:
        """Grid fidelity: chip ``cid``'s configuration."""
        assert self.chip is not None
        return replace(self.chip, system=self.place(cid))

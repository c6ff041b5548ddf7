"""Everything one system simulation needs (plain frozen data, picklable for Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mapping.systems import System
from mapping.topology import SystemGraph, system_graph
from sim.system.network import SystemNet

FIDELITIES = ("box",)  # "grid": every chip's CU/MU grid and NoC (mapped execution on each chip) is not built yet


@dataclass(frozen=True)
class SystemConfig:
    system: System
    clock_hz: float  # the chips' clock: the simulation's cycle
    packet_bytes: int  # messages cross links in packets of this size
    fidelity: str
    workload: Any  # a system workload's parameters (sim/system/programs.py)
    seed: int = 1
    max_cycles: int = 1 << 62
    graph: SystemGraph = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "graph", system_graph(self.system))

    def net(self) -> SystemNet:
        return SystemNet(self.graph, self.clock_hz, self.packet_bytes)

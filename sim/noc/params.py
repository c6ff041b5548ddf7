"""Parameters of the cycle-level virtual-channel NoC and its synthetic traffic.

Timing follows BookSim2's input-queued router (Dally & Towles, "Principles and
Practices of Interconnection Networks", ch. 16): a head flit that reaches an input
buffer at cycle ``a`` may bid for an output virtual channel at ``a + routing_delay``;
a grant at cycle ``v`` lets it bid for the switch at ``v + vc_alloc_delay``; a switch
grant at cycle ``s`` puts it in the next router's buffer at
``s + sw_alloc_delay + st_delay + link_latency`` and returns a credit upstream, usable
at ``s + link_latency + 1 + credit_delay``. Allocators are pipelined: a delay adds
latency, not occupancy. With the reference "config B" (0/1/1/1, link 1, credit 1) the
zero-load latency is ``4 (H + 1) + 2 + (L - 1)`` cycles, as BookSim2 measures.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sim.noc.routing import ROUTINGS
from sim.noc.topology import Grid
from sim.noc.traffic import TRAFFIC_PATTERNS

TOPOLOGIES = ("mesh", "torus")
# router and link timing, in cycles: the keys of a config's [noc] table and of NocParams
TIMING_KEYS = ("routing_delay", "vc_alloc_delay", "sw_alloc_delay", "st_delay", "link_latency", "credit_delay")


@dataclass(frozen=True)
class NocParams:
    """Everything that defines one NoC simulation (sizes in flits, times in cycles)."""

    rows: int = 8
    cols: int = 8
    topology: str = "mesh"
    vcs: int = 4
    vc_buffers: int = 4
    routing_delay: int = 0
    vc_alloc_delay: int = 1
    sw_alloc_delay: int = 1
    st_delay: int = 1
    link_latency: int = 1
    credit_delay: int = 1
    packet_flits: int = 1
    traffic: str = "uniform"  # a registered traffic pattern (sim/noc/traffic.py)
    routing: str = "xy"  # a registered routing function (sim/noc/routing.py)
    rate: float = 0.1  # offered load, flits/node/cycle
    hotspot_nodes: tuple[int, ...] = field(default_factory=tuple)
    hotspot_fraction: float = 0.1
    warmup_cycles: int = 3000
    measure_cycles: int = 3000
    drain_cycles: int = 20000
    seed: int = 1

    def __post_init__(self):
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    def problems(self) -> list[str]:
        """Every inconsistency, as readable sentences (empty when valid)."""
        out = []
        if self.rows < 1 or self.cols < 1 or self.rows * self.cols < 2:
            out.append(f"grid {self.rows}x{self.cols} needs at least two routers")
        if self.topology not in TOPOLOGIES:
            out.append(f"topology {self.topology!r} is not one of {TOPOLOGIES}")
        if self.topology == "torus" and self.vcs < 2:
            out.append("a torus needs at least 2 virtual channels (dateline classes avoid deadlock)")
        if self.vcs < 1 or self.vc_buffers < 1:
            out.append("vcs and vc_buffers must be at least 1")
        for name in ("vc_alloc_delay", "sw_alloc_delay", "st_delay", "link_latency"):
            if getattr(self, name) < 1:
                out.append(f"{name} must be at least 1 cycle")
        if self.routing_delay < 0 or self.credit_delay < 0:
            out.append("routing_delay and credit_delay cannot be negative")
        if self.packet_flits < 1:
            out.append("packet_flits must be at least 1")
        if not 0.0 <= self.rate <= self.packet_flits:
            out.append(f"rate {self.rate} must be between 0 and packet_flits (one packet per node per cycle)")
        for what, reg, name in (("traffic", TRAFFIC_PATTERNS, self.traffic), ("routing", ROUTINGS, self.routing)):
            if name not in reg.names():
                out.append(f"{what} {name!r} is not one of {', '.join(reg.names())}")
        if self.traffic == "transpose" and self.rows != self.cols:
            out.append("transpose traffic needs a square grid (rows == cols)")
        n = self.rows * self.cols
        bad = [h for h in self.hotspot_nodes if not 0 <= h < n]
        if bad:
            out.append(f"hotspot nodes {bad} are outside 0..{n - 1}")
        if not 0.0 <= self.hotspot_fraction <= 1.0:
            out.append("hotspot_fraction must be between 0 and 1")
        if self.warmup_cycles < 0 or self.measure_cycles < 1 or self.drain_cycles < 0:
            out.append("warmup_cycles >= 0, measure_cycles >= 1 and drain_cycles >= 0 are required")
        return out

    @property
    def nodes(self) -> int:
        return self.rows * self.cols

    @property
    def torus(self) -> bool:
        return self.topology == "torus"

    @property
    def grid(self) -> Grid:
        """The routers' geometry and routing (sim/noc/topology.py)."""
        return Grid(self.rows, self.cols, self.torus, self.routing)

    @property
    def flit_delay(self) -> int:
        """Cycles from a switch grant to the flit sitting in the next buffer."""
        return self.sw_alloc_delay + self.st_delay + self.link_latency

    @property
    def credit_return(self) -> int:
        """Cycles from a switch grant downstream to the credit being usable upstream."""
        return self.link_latency + 1 + self.credit_delay

    @property
    def inject_delay(self) -> int:
        """Cycles from the source sending a flit to it sitting in the router's input buffer."""
        return 1 + self.link_latency

    @property
    def inject_credit_return(self) -> int:
        """Cycles from a grant at the injection port to the credit being usable at the source."""
        return self.link_latency + 1

    @property
    def eject_credit_return(self) -> int:
        """Cycles from a grant to the ejection port to its credit being usable again."""
        return self.flit_delay + self.link_latency + 1 + self.credit_delay

    @property
    def packet_rate(self) -> float:
        """Bernoulli probability that a node creates a packet in a cycle."""
        return self.rate / self.packet_flits

    def zero_load_latency(self, hops):
        """Closed form T0(H) for this router: per-router pipeline, links, serialisation."""
        per_router = self.routing_delay + self.vc_alloc_delay + self.flit_delay
        return per_router * (hops + 1) + self.inject_delay + (self.packet_flits - 1)

    def with_(self, **changes) -> "NocParams":
        return replace(self, **changes)

    @property
    def hotspots(self) -> tuple[int, ...]:
        """Hotspot routers; the centre router when none are given."""
        if self.hotspot_nodes:
            return tuple(self.hotspot_nodes)
        return ((self.rows // 2) * self.cols + self.cols // 2,)

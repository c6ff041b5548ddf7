"""Everything one chip simulation needs, as plain frozen dataclasses (picklable for Ray)."""

from __future__ import annotations

from dataclasses import dataclass

from mapping.chips import ChipSpec
from sim.chip.messages import Sizing
from sim.chip.program import ChipWorkload
from sim.chip.reclaim import Reclamation
from sim.energy.table import EnergyTable
from sim.memory.policies import MuGeometry, PolicyParams
from sim.noc.params import NocParams

OOM_BEHAVIOURS = ("stall", "evict", "fail", "preempt")
PREEMPT_MODES = ("recompute", "swap")  # what memory.on_oom = "preempt" does with a preempted sequence's KV
PLACEMENTS = ("spread", "near", "random")
BULK = ("packets", "flows")  # how DRAM data moves (noc.bulk); a chip with memory tiers moves it as flows
NI_LATENCY = 1  # cycles from a unit sending a message to its first packet being offered (packetisation)


@dataclass(frozen=True)
class SystemPlace:
    """Where a chip sits in a system of chips (sim/system/): what its units need to reach the others."""

    chip: int  # this chip's id
    chips: int
    egress: tuple[int, ...]  # per destination chip: unit id of the IO unit its route leaves by (-1: this chip)
    groups: tuple[tuple[int, ...], ...]  # per network dimension: the chips of this chip's group, in ring order
    parallelism: tuple[str, ...]  # per network dimension: "TP", "PP" or "DP"

    @property
    def io_ports(self) -> int:
        return len(self.groups)

    def group(self, parallelism: str) -> tuple[int, ...]:
        """This chip's group along the dimension carrying ``parallelism`` (just this chip if none does)."""
        for g, p in zip(self.groups, self.parallelism):
            if p == parallelism:
                return g
        return (self.chip,)


@dataclass(frozen=True)
class ChipConfig:
    spec: ChipSpec
    noc: NocParams  # router timing and grid; its traffic fields are unused
    network: str  # a registered NoC model (sim/network.py): "cycle" or "packet"
    sizing: Sizing
    mu: MuGeometry  # what every MU tells its memory policy
    policy: PolicyParams  # a registered memory policy's parameters (sim/memory/policies)
    reclaim: Reclamation  # a registered reclamation protocol (sim/chip/reclaim)
    workload: ChipWorkload  # a registered workload's parameters (sim/workloads)
    on_oom: str = "stall"
    preempt_mode: str = "recompute"  # on_oom = "preempt": free the KV and prefill again, or swap it to DRAM
    admit_watermark: float = 0.0  # share of every MU kept free when admitting (memory-aware admission)
    prefix_sharing: bool = True  # decode with a trace's prefix blocks: running sequences share them
    prefix_cache_bytes: int = 0  # ... and blocks no sequence holds are kept up to this many KV bytes
    placement: str = "spread"
    jitter: int = 0  # extra random 0..jitter cycles before a message enters the network
    seed: int = 1
    max_cycles: int = 2_000_000
    sample_cycles: int = 1000  # period of the per-MU time series
    trace: bool = False
    trace_limit: int = 200_000  # events kept per shard
    memory_map_cycle: int = -1  # snapshot every MU's map at the start of this cycle (-1: none)
    energy: EnergyTable | None = None  # per-action energies (None: the default table)
    system: SystemPlace | None = None  # the chip's place in a system of chips (None: a chip on its own)
    bulk: str = "packets"  # how data moves to and from DRAM: packets, or flows (sim/flows; always, with tiers)

    @property
    def io_ports(self) -> int:
        return self.system.io_ports if self.system is not None else 0

    @property
    def step(self) -> int:
        """Longest window [t, t + step) the network can advance in one go between two passes
        over the units: a packet granted at s reaches its terminal at s + flit_delay or
        later, and what a unit sends enters the network NI_LATENCY cycles after it is sent."""
        return self.noc.flit_delay + NI_LATENCY


def noc_params_for(spec: ChipSpec, seed: int, **timing) -> NocParams:
    """NocParams for the chip's grid; scripted traffic only (rate 0), no measurement window."""
    return NocParams(rows=spec.rows, cols=spec.cols, vcs=spec.vcs, vc_buffers=spec.vc_buffers, rate=0.0,
                     warmup_cycles=0, measure_cycles=1, drain_cycles=0, seed=seed, **timing)

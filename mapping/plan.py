"""The mapper's answer: a MappingPlan with per-kernel and per-partition detail.

Every plan states its lower bound and gap; an infeasible plan says which constraint fails.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class KernelPlan:
    name: str
    kind: str
    phase: str
    split_dim: str  # dimension split over the TP group (none when unsplit)
    partition: int
    flop: float  # per chip, per graph pass (all tiles)
    compute_seconds: float  # roofline or detailed time of the kernel alone
    network_seconds: float
    weight_bytes: float  # per chip
    streamed: bool  # weight sliced while the kernel runs alone (DFModel's tiling factor)
    collectives: str  # collectives the kernel issues, comma separated


@dataclass(frozen=True)
class PartitionPlan:
    index: int
    kernels: tuple[str, ...]
    compute_seconds: float
    memory_seconds: float
    network_seconds: float
    seconds: float  # max of the three (perfect overlap) or their sum
    sram_bytes: float


@dataclass(frozen=True)
class MappingPlan:
    workload: str
    system: str  # topology and shape, e.g. "r_r 8x128"
    chip: str
    chips: int
    status: str  # optimal | feasible (gap stated) | infeasible
    tp: int = 0
    pp: int = 0
    dp: int = 0
    copies: int = 1
    micro_batch: int = 0
    tile_size: int = 0
    num_tiles: int = 0
    layers_per_stage: int = 0
    num_micro_batches: int = 0
    pipeline_factor: float = math.nan
    seconds_per_batch: float = math.inf
    lower_bound_seconds: float = 0.0
    gap: float = math.inf
    utilization: float = 0.0
    cost: float = math.nan
    power: float = math.nan
    p2p_seconds: float = 0.0
    collective_bytes: float = 0.0  # inter-chip pass optimum (per graph pass, whole tensors)
    dram_bytes: float = 0.0  # peak per chip
    solver_seconds: float = 0.0
    candidates: int = 0  # parallelism candidates considered
    pruned: int = 0  # of which discarded by bound or dominance without a MILP
    reason: str = ""  # for an infeasible plan: the failing constraint
    kernels: tuple[KernelPlan, ...] = ()
    partitions: tuple[PartitionPlan, ...] = ()

    SUMMARY_KEYS = ("tp", "pp", "dp", "micro_batch", "seconds_per_batch", "utilization", "cost", "power",
                    "solver_seconds", "gap", "status")

    @property
    def feasible(self) -> bool:
        return self.status in ("optimal", "feasible")

    def summary(self) -> dict:
        """The fields `rdasim map --json` prints, plus bound and reason."""
        out = {k: getattr(self, k) for k in self.SUMMARY_KEYS}
        out["lower_bound_seconds"] = self.lower_bound_seconds
        if self.reason:
            out["reason"] = self.reason
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}

    def to_dict(self) -> dict:
        return asdict(self)

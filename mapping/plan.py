"""The mapper's answer: a MappingPlan with per-kernel, per-tensor and per-partition detail.

Every plan states its lower bound and gap; an infeasible plan says which constraint fails.
A plan carries what running it needs (each kernel's per-chip, per-tile slice, each
tensor's tile size and buffer depth, the graph itself), and goes to JSON and back
unchanged (``to_dict`` / ``MappingPlan.from_dict``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any


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
    # the per-chip, per-tile slice it computes (DFModel's shard sizes): out[m, n] from k
    m: int = 0
    k: int = 0
    n: int = 0
    tiles: int = 1  # tiles per graph pass
    flop_per_tile: float = 0.0
    extra_dram_bytes: float = 0.0  # per chip per graph pass, outside the graph's tensors (embeddings, KV cache)
    role: str = ""  # mapping.graph.Kernel.role: a cache it appends to or reads, or experts
    outer: int = 1  # the graph kernel's outer dimension (experts, heads)


@dataclass(frozen=True)
class TensorPlan:
    """One edge of the graph as the chip sees it."""

    producer: str
    consumer: str
    operand: int
    tile_bytes: float  # per chip, per tile
    depth: int  # tiles its on-chip buffer holds (DFModel's buffer depth)
    on_chip: bool  # both ends in one partition; else it spills to DRAM between partitions
    lag: int = 0  # a loop-carried tensor (mapping/looping.py): tile i reads the producer's tile i - lag


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
    tensors: tuple[TensorPlan, ...] = ()
    word: int = 2  # bytes per element
    graph: dict | None = None  # mapping.graph.to_dict of the workload's graph
    # what one graph pass processes (mapping.workload.Workload): ``units_per_pass`` of ``pass_unit``
    pass_unit: str = "graph passes"
    units_per_pass: int = 1

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

    @classmethod
    def from_dict(cls, data: dict) -> "MappingPlan":
        """The plan ``to_dict`` wrote (unknown keys are an error naming them)."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise ValueError(f"not a mapping plan: unknown keys {extra}")
        values: dict[str, Any] = dict(data)
        values["kernels"] = tuple(KernelPlan(**k) for k in data.get("kernels", ()))
        values["partitions"] = tuple(PartitionPlan(**{**p, "kernels": tuple(p["kernels"])})
                                     for p in data.get("partitions", ()))
        values["tensors"] = tuple(TensorPlan(**t) for t in data.get("tensors", ()))
        return cls(**values)

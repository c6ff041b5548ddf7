"""The weight design of a dataflow plan by static analysis (partial-free reclamation).

Under weighted reference counting a copy splits its holder's weight and a holder whose
weight cannot split borrows from the MU (sim/chip/reclaim/weighted.py). In a dataflow run
the controller allocates every stripe of a partition's buffers and copies its reference to
each CU that reads or writes the stripe (compile.stripe_holders), a cache stripe to its
reader and appender, then drops its own; no CU copies a reference on. So a stripe's
reference has ``holders + 1`` references alive at once at most, and the narrowest weight
field that never borrows is the one whose full weight gives ``holders`` copies
(allocators/weight_bits.py). ``min_weight_bits`` is that field for a whole plan: a known
constraint on ``memory.weight_bits`` for a design-space search.
"""

from __future__ import annotations

from dataclasses import dataclass

from allocators.weight_bits import min_bits
from allocators.weights import STRATEGIES
from mapping.chips import RDA_PRESETS, ChipSpec
from mapping.placement import GridPlacement
from mapping.plan import MappingPlan
from sim.workloads.dataflow.compile import build_caches, build_partitions, stripe_holders
from sim.workloads.dataflow.planning import PlannedDataflow, map_placement


@dataclass(frozen=True)
class BufferSharing:
    """One buffer's widest fan-out over its stripes and the weight field each split needs for it."""

    partition: int  # the plan's partition index (-1: a cache living through the run)
    buffer: str
    kind: str  # weight, tiles or cache
    stripes: int
    shared_references: int  # the most CUs one of its stripes' references is copied to
    min_bits: dict[str, int]  # per split: the narrowest memory.weight_bits that never borrows

    def to_dict(self) -> dict:
        return {"partition": self.partition, "buffer": self.buffer, "kind": self.kind, "stripes": self.stripes,
                "shared_references": self.shared_references, "min_bits": dict(self.min_bits)}


@dataclass(frozen=True)
class WeightDesign:
    """Every buffer's sharing, and the plan-wide figures: its widest fan-out and, per split,
    the narrowest weight field with which no holder ever borrows."""

    buffers: tuple[BufferSharing, ...]

    @property
    def shared_references(self) -> int:
        return max((b.shared_references for b in self.buffers), default=0)

    def min_bits(self, split: str) -> int:
        return min_bits(self.shared_references, split)

    def to_dict(self) -> dict:
        return {"shared_references": self.shared_references,
                "min_bits": {s: self.min_bits(s) for s in STRATEGIES},
                "buffers": [b.to_dict() for b in self.buffers]}


def _sharing(partition: int, buffer: str, kind: str, fan_outs: list[int]) -> BufferSharing:
    most = max(fan_outs, default=0)
    return BufferSharing(partition, buffer, kind, len(fan_outs), most, {s: min_bits(most, s) for s in STRATEGIES})


def weight_design(plan: MappingPlan, placement: GridPlacement, spec: ChipSpec) -> WeightDesign:
    """The sharing of every buffer of a placed plan, from the program the run compiles from it."""
    out = []
    for part in build_partitions(plan, placement, spec):
        holders = stripe_holders(part)
        for b, buf in enumerate(part.buffers):
            fan_outs = [len(holders[b, s]) for s in range(len(buf.stripes))]
            out.append(_sharing(part.index, buf.name, buf.kind, fan_outs))
    for cache in build_caches(placement):
        out.append(_sharing(-1, cache.name, "cache", [len(st.holders) for st in cache.stripes]))
    return WeightDesign(tuple(out))


def design_of(planned: PlannedDataflow | MappingPlan, spec: ChipSpec | None = None) -> WeightDesign:
    """The weight design of a placed plan on ``spec`` (default: its chip's preset); a bare plan
    is placed as `rdasim map` places it (planning.map_placement). ValueError for a plan with no
    grid placement, PlacementError (a ValueError) for one that does not fit its chip."""
    if isinstance(planned, MappingPlan):
        placement = map_placement(planned)
        if placement is None:
            raise ValueError(f"plan {planned.workload!r} has no grid placement: the weight design needs a "
                             f"feasible single-chip plan on one of {', '.join(RDA_PRESETS)}")
        planned = PlannedDataflow(planned, placement)
    spec = spec or RDA_PRESETS.get(planned.plan.chip)
    if spec is None:
        raise ValueError(f"chip {planned.plan.chip!r} is not an RDA grid preset: give its ChipSpec")
    return weight_design(planned.plan, planned.placement, spec)


def min_weight_bits(plan: PlannedDataflow | MappingPlan, split: str, spec: ChipSpec | None = None) -> int:
    """The narrowest ``memory.weight_bits`` with which no holder of ``plan`` ever borrows under
    ``split`` (a known constraint for a design-space search: a partial-free run with fewer bits
    borrows, a weight request and its grant per holder that runs out). ValueError for a plan
    with no grid placement or an unknown split."""
    return design_of(plan, spec).min_bits(split)

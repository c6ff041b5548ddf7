"""A serving step's plan, mapped and simulated cycle by cycle: what prices every step.

For an anchor shape (shapes.py) the step's layer is mapped by DFModel's MILP onto the chip
with its weights off chip (mapping/generators/serve.py; ``tiles`` at most ``tiles_max`` tiles
a layer), its weights and KV caches homed in the chip's first memory tier, looped over
layers as kernel looping runs it (mapping/looping.py: the next layer's weights stream while
the current one computes, a layer's tile waiting for the one below), placed on the grid
(each streaming kernel spread over CUs by its weight, ``stream_bytes`` a CU at least) and
simulated on the whole chip as a nested run of the dataflow workload: every weight slice and
cached K/V share a flow from the tier sharing its bandwidth max-min fairly, every activation
tile a packet through the NoC into MU tile buffers allocated under the run's memory policy,
every buffer reference shared under its reclamation protocol.

A pass of ``L`` layers takes ``a + b L`` cycles once the loop is in its steady state. The
first layer starts every stream after the partition's setup and has no carried input; the
second had part of its weights streamed while the first finished (each CU asks for the next
layer's slice as soon as it has the current one); the last has no next layer's weights
streaming beside it; the layers between are the steady state. The anchor simulates 4
layers and takes ``b`` from the cycles between the second and third layers' last tiles
leaving the loop's last kernel, so a step of the model's ``layers`` costs
``C(4) + (layers - 4) b`` (``StepPlanRun.cycles_for``).
Simulating all of a model's layers would give the same figure at 16-40 times the cost; the
test tests/sim/workloads/serve/test_anchors.py checks the extrapolation against longer runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from mapping.generators.serve import FIRST, LAST, step_workload
from mapping.looping import looped
from mapping.models import ModelSpec
from mapping.placement import place_on_grid
from mapping.plan import MappingPlan
from sim.workloads.serve.shapes import StepShape

LAYERS = 4  # layers an anchor's looped run simulates (module docstring: the third is in the steady state)


@dataclass(frozen=True)
class StepPlanRun:
    """What an anchor's simulation found."""

    shape: StepShape
    tiles: int  # tiles a layer (the step's tokens in tiles of ``tokens / tiles``)
    cus: int  # CUs its kernels use
    layers: int  # layers its looped run simulated
    end: int  # the run's cycles (controller's start to the pass's end)
    per_layer: float  # cycles a layer adds in the loop's steady state (module docstring)
    roofline_layer: float  # one layer's roofline (its plan's bytes and FLOPs), cycles
    plan_status: str  # the MILP's
    messages: int  # messages the run sent
    layer_ends: tuple[int, ...] = ()  # cycle each layer's last tile left its last CU

    def cycles_for(self, layers: int) -> float:
        """Cycles of ``layers`` looped layers (module docstring)."""
        return self.end + (layers - self.layers) * self.per_layer

    def efficiency(self, layers: int) -> float:
        """Simulated over roofline cycles for ``layers`` layers (1: at the roofline)."""
        return self.cycles_for(layers) / (layers * self.roofline_layer)


def step_plan(model: ModelSpec, shape: StepShape, spec, tiles_max: int, mapping: dict) -> MappingPlan:
    """The step's one-layer plan on ``spec`` (one chip), its weights streamed from off chip."""
    from mapping.solver import map_workload
    from mapping.specs import build_model
    from mapping.systems import LinkKind, NetworkDim, Parallelism, System
    from sim.workloads.dataflow.planning import weights_streamed

    tiles = max(1, min(shape.tokens, tiles_max))
    tile = math.ceil(shape.tokens / tiles)
    work = step_workload(model, shape.tokens, shape.keys, shape.kv_read, tile_size=tile, name=f"{model.name}-step")
    system = System(1, spec.dfmodel(), (NetworkDim(LinkKind.RING, 1, 1.0, Parallelism.TP),))
    plan = map_workload(work, system, build_model({**mapping, "weights_off_chip": True, "partitions": 1}),
                        float(mapping.get("time_limit") or 60.0), float(mapping.get("gap") or 1e-3))
    if not plan.feasible:
        raise ValueError(f"{model.name}: the step of {shape.tokens} tokens does not map onto {spec.name}: "
                         f"{plan.reason}")
    return weights_streamed(plan)


def simulate_anchor(cfg, model: ModelSpec, shape: StepShape, tiles_max: int = 8, stream_bytes: int = 64 * 1024,
                    mapping: dict | None = None, layers: int = LAYERS) -> StepPlanRun:
    """Map, loop, place and simulate the step of ``shape`` on ``cfg``'s chip (a ChipConfig: its
    NoC, memory policy and reclamation protocol), ``layers`` layers of it; ValueError if it
    does not map or place."""
    from mapping.placement import PlacementError
    from sim.workloads.dataflow.compile import Homes
    from sim.workloads.dataflow.params import DataflowParams
    from sim.workloads.dataflow.planning import plan_addresses

    spec = cfg.spec
    if not spec.tiers:
        raise ValueError(f"chip {spec.name!r} has no memory tiers: a real model's weights live in one (sn40l)")
    if layers < 4:
        raise ValueError("an anchor simulates at least 4 layers (the third is in the loop's steady state)")
    source = spec.tiers[0].name
    plan = step_plan(model, shape, spec, tiles_max, mapping or {})
    lp = looped(plan, layers, FIRST, LAST)
    try:  # the local search cut short and no bound: the weights' streams, not the NoC, set a step's pace
        placement = place_on_grid(lp, spec, cfg.seed, cfg.policy.room(cfg.mu), stream_bytes=stream_bytes, rounds=2,
                                  bound=False)
        placement = plan_addresses(replace(placement, caches=()), spec.mu_bytes, "greedy")
    except PlacementError as exc:
        raise ValueError(f"{model.name}: the step of {shape.tokens} tokens does not fit {spec.name}: {exc}") from None
    params = DataflowParams.from_plan(lp, placement, spec, 1, 0.0, Homes(source, source, source), True)
    end, ends, sent = _run(replace(cfg, workload=params, trace=False, memory_map_cycle=-1), plan.num_tiles)
    cus = sum(len(k.cus) for k in placement.partitions[0].kernels)
    lb, lf = _plan_cost(plan)
    roof = max(lb / spec.tiers[0].bytes_per_cycle(spec.clock_hz), lf / (spec.cu_count * spec.cu_flops_per_cycle))
    # the steady state: between the ends of the last layer but one and the layer before it
    return StepPlanRun(shape, plan.num_tiles, cus, layers, end, float(ends[-2] - ends[-3]), roof, plan.status, sent,
                       ends)


def _plan_cost(plan: MappingPlan) -> tuple[float, float]:
    """(bytes, FLOPs) of one layer of a one-layer plan as simulated: streamed weights, cache traffic."""
    return (sum(k.weight_bytes + k.extra_dram_bytes for k in plan.kernels), sum(k.flop for k in plan.kernels))


def _run(cfg, tiles: int) -> tuple[int, tuple[int, ...], int]:
    """Simulate one pass of a looped dataflow ChipConfig on the whole chip in this process: (cycles
    from the start to the pass's end, each layer's end, messages sent). ValueError if the pass
    fails or never ends."""
    from sim.chip.records import CarriedTile
    from sim.chip.shard import ChipShard
    from sim.noc.topology import Region
    from sim.workloads import make_program

    spec = cfg.spec
    shard = ChipShard(cfg, Region(0, spec.rows, 0, spec.cols), make_program(cfg.workload, cfg))
    shard.advance(0, cfg.max_cycles)
    passes = [r for r in shard.records if r.kind == "request"]
    if not passes or passes[-1].status != "ok":
        why = "failed" if passes else f"did not end within {cfg.max_cycles:,} cycles"
        raise ValueError(f"the step's plan {why} on {spec.name} under memory policy {cfg.policy.name!r}")
    last: dict[int, int] = {}  # layer -> the cycle its last tile was written, by its last CU
    for x in shard.logged:
        if isinstance(x, CarriedTile) and (x.tile + 1) % tiles == 0:
            last[x.tile // tiles] = max(last.get(x.tile // tiles, 0), x.cycle)
    return int(passes[-1].end), tuple(last[k] for k in sorted(last)), int(shard.sent_count.sum())

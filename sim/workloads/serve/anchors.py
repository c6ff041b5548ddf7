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
next ones had part of their weights streamed while the ones before finished (each CU asks for
its next two iterations' slices as soon as it has the current one's operands), which a small
chip's loop takes a few layers to settle from; the last has no next layer's weights streaming
beside it. A memory-bound anchor (decode: one tile a layer) simulates 6 layers and takes ``b``
as the mean span of the second to fifth layers (from the first layer's last tile leaving the
loop's last kernel to the fifth's), so a step of the model's ``layers`` costs
``C(6) + (layers - 6) b`` (``StepPlanRun.cycles_for``). One layer's span is not enough: the
streams run up to two layers ahead, so single spans vary around their mean (on the whole sn40l
a batch-8 step's spans went 300k, 300k, 820k cycles in turn over 12 layers, mean 460k against a
roofline of 445k; priced from the fifth layer's span alone it came out 22 % below its
roofline). Four spans do not always average such a cycle out, so ``b`` is at least the layer's
bytes over the tier's bandwidth: in a steady loop every layer's weights pass through the tier,
which no span can beat on average. A memory-bound step of more tokens (a decode batch of 8 or
more) runs its layer in a tile per 4 tokens, 8 tiles at most, so that the layer's kernels
pipeline instead of waiting for each other in turn (in one tile of 64 tokens, a layer's 14
kernels ran one after another, 0.96 M cycles against the weights' 0.50 M), and its kernels' CUs
follow their share of the streamed bytes as well as of the FLOPs (placement's ``by_bytes``:
by FLOPs alone attention got 4 CUs at batch 64, each streaming 8.4 MB of KV a layer while
every other CU streamed 0.4 MB, and since the tier shares its bandwidth per flow those
flows ended last, 0.6 M cycles after the weights); it simulates 12 iterations (two layers at
least) and takes ``b`` per iteration as the mean spacing of the later half, at least a
tile's share of the layer's bytes over the bandwidth. Every anchor's tiles that a kernel's
CUs all read whole (a weight GEMM's input, spread over up to 554 CUs by its weight) reach
them by multicast, one read from each MU a stripe, relayed down a tree over the CUs
(sim/workloads/dataflow/compile.multicast_trees): read by every CU in turn, a batch-64
layer's operands moved 911 MB over the NoC from a few dozen MUs against 503 MB of weights
from HBM, 1.4 M of its 2.05 M cycles. With multicast operands a CU may compute as little as
128 B of a tile's output (placement's ``min_share``; 512 B otherwise): at 512 B a 512-token
prompt's Down projection (16 tokens x 4,096 x 2 B a tile) had 256 CUs, the pipeline's slowest
stage, 9 % over the tile's FLOPs. An elementwise kernel gets CUs for the bytes through its
links as well as its FLOPs (``by_io``: a 2,048-token prompt's softmax read and wrote 4.2 MB a
tile through one CU). A compute-bound anchor (prefill) runs its layer in up to 32
tiles, a pipeline: it simulates the first 20 iterations (the pipeline full, a layer's tile
waiting for the layer below only after the pipeline has passed) and takes ``b`` per iteration
from the last few tiles' spacing, at least a tile's FLOPs over the chip's peak. Simulating all
of a model's layers would give the same figure at 5-40 times the cost;
tests/sim/workloads/serve/test_anchors.py checks the extrapolations against longer runs.

Unlooped (a kernel call a layer, "Kernel Looping"'s baseline: costs.py's ``looping = false``), an
anchor is one layer simulated alone, every tile of it (``layers = 1``): the call's pipeline filled
from cold streams and drained, nothing of a next layer streaming under it, so each of a step's
layers costs the whole pass. The looped run's first layer is no stand-in for it: its spans run
ahead into the next layers' weights, and extrapolated back (``end`` less five steady layers) the
first layer of Llama-3.1-8B's batch-1 step on one whole sn40l came out 393k cycles, under its
436k-cycle roofline, against 475k simulated alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from mapping.generators.serve import FIRST, LAST, step_workload
from mapping.looping import looped
from mapping.models import ModelSpec
from mapping.placement import place_on_grid
from mapping.plan import MappingPlan
from sim.workloads.serve.shapes import StepShape, layer_cost

LAYERS = 6  # layers a memory-bound anchor's looped run simulates (module docstring: the fifth is steady)
PIPELINE = 20  # iterations a compute-bound anchor's run simulates: its pipeline full, then steady
DECODE_TILE = 4  # tokens a tile of a memory-bound step at least: larger batches run in tiles that pipeline ...
DECODE_TILES = 8  # ... up to this many tiles a layer
MIN_SHARE = 128  # bytes of a tile's output a CU computes at least: multicast operands make finer splits cheap
STEADY = 12  # iterations a tiled memory-bound anchor's run simulates at least (two layers' at least)


@dataclass(frozen=True)
class PlanMemory:
    """What an anchor's run held in the chip's MUs and moved through its first memory tier: a step it
    prices holds and moves as much (shares of all the chip's MU bytes, over the run's cycles)."""

    mu_peak: float = 0.0  # largest share of the MU bytes holding live data at once
    mu_mean: float = 0.0  # time-averaged share holding live data
    mu_reserved_peak: float = 0.0  # largest share reserved by buffers
    mu_reserved_mean: float = 0.0  # time-averaged share reserved
    tier_bytes: int = 0  # bytes read and written in the tier its weights and K/V live in
    tier_flows: int = 0  # flows those bytes moved in


@dataclass(frozen=True)
class StepPlanRun:
    """What an anchor's simulation found."""

    shape: StepShape
    tiles: int  # tiles a layer (the step's tokens in tiles of ``tokens / tiles``)
    cus: int  # CUs its kernels use
    iterations: int  # iterations (layer x tile) its looped run simulated
    end: int  # the run's cycles (controller's start to the pass's end)
    per_iteration: float  # cycles an iteration adds in the loop's steady state (module docstring)
    roofline_layer: float  # one layer's roofline (its plan's bytes and FLOPs), cycles
    plan_status: str  # the MILP's
    messages: int  # messages the run sent
    ends: tuple[int, ...] = ()  # cycle each iteration's tile left the loop's last kernel
    oom_events: int = 0  # times an MU ran out of memory in the run (memory.on_oom acted: cache.py)
    memory: PlanMemory = PlanMemory()  # its MUs' bytes and its tier traffic

    def cycles_for(self, layers: int) -> float:
        """Cycles of ``layers`` looped layers (module docstring)."""
        return self.end + (layers * self.tiles - self.iterations) * self.per_iteration

    def efficiency(self, layers: int) -> float:
        """Simulated over roofline cycles for ``layers`` layers (1: at the roofline)."""
        return self.cycles_for(layers) / (layers * self.roofline_layer)


def step_plan(model: ModelSpec, shape: StepShape, spec, tiles: int, mapping: dict) -> MappingPlan:
    """The step's one-layer plan on ``spec`` (one chip) in ``tiles`` tiles at most, its weights
    streamed from off chip."""
    from mapping.solver import map_workload
    from mapping.specs import build_model
    from mapping.systems import LinkKind, NetworkDim, Parallelism, System
    from sim.workloads.dataflow.planning import weights_streamed

    tile = tile_tokens(shape.tokens, tiles)
    work = step_workload(model, shape.tokens, shape.keys, shape.kv_read, tile_size=tile, name=f"{model.name}-step")
    system = System(1, spec.dfmodel(), (NetworkDim(LinkKind.RING, 1, 1.0, Parallelism.TP),))
    plan = map_workload(work, system, build_model({**mapping, "weights_off_chip": True, "partitions": 1}),
                        float(mapping.get("time_limit") or 60.0), float(mapping.get("gap") or 1e-3))
    if not plan.feasible:
        raise ValueError(f"{model.name}: the step of {shape.tokens} tokens does not map onto {spec.name}: "
                         f"{plan.reason}")
    return weights_streamed(plan)


def tile_tokens(tokens: int, tiles: int) -> int:
    """Tokens a tile of a step of ``tokens`` in ``tiles`` tiles at most."""
    return math.ceil(tokens / max(1, min(tokens, tiles)))


def compute_bound(model: ModelSpec, shape: StepShape, spec) -> bool:
    """Whether the step's layer takes longer to compute than to stream at the roofline."""
    nbytes, flops = layer_cost(model, shape)
    return flops / (spec.cu_count * spec.cu_flops_per_cycle) > nbytes / spec.tiers[0].bytes_per_cycle(spec.clock_hz)


def simulate_anchor(cfg, model: ModelSpec, shape: StepShape, tiles_max: int = 32, stream_bytes: int = 64 * 1024,
                    mapping: dict | None = None, layers: int = LAYERS, pipeline: int = PIPELINE,
                    multicast: bool = True, decode_tile: int = DECODE_TILE, steady: int = STEADY,
                    by_bytes: bool | None = None) -> StepPlanRun:
    """Map, loop, place and simulate the step of ``shape`` on ``cfg``'s chip (a ChipConfig: its
    NoC, memory policy and reclamation protocol); ValueError if it does not map or place.
    ``layers`` 1: the layer alone, every tile once, as one kernel call (unlooped: module docstring).
    A memory-bound step runs in tiles of ``decode_tile`` tokens (DECODE_TILES at most): in one
    tile a layer, ``layers`` layers of it, in several ``steady`` iterations (two layers' at
    least); a compute-bound one in ``tiles_max`` tiles a layer (its pipeline full: a layer's
    tile waits for the layer below only after the whole pipeline has passed), ``pipeline``
    iterations of it (a layer at most). ``multicast``: a tile a kernel's CUs all read whole
    reaches them by multicast (compile.multicast_trees); ``by_bytes``: the placement's
    (default: for a tiled memory-bound step). Under a policy of a fixed count of buffers an MU
    (static-single's one, static-multi's slots) a step whose stripes outnumber the slots has
    fewer CUs in all (placement's ``fit_slots``: each producer CU writes a stripe of every tensor
    it makes, so finer tiles do not cut the count); a step whose buffers then place in no MU
    under the policy (its room: a static slot, a copy's reserve) is mapped again in twice the
    tiles, as a compiler would tile it finer, until it places or a tile is one token (then
    ValueError)."""
    from mapping.placement import PlacementError
    from sim.workloads.dataflow.compile import Homes
    from sim.workloads.dataflow.params import DataflowParams
    from sim.workloads.dataflow.planning import plan_addresses

    spec = cfg.spec
    if not spec.tiers:
        raise ValueError(f"chip {spec.name!r} has no memory tiers: a real model's weights live in one (sn40l)")
    if layers < 4 and layers != 1:
        raise ValueError("an anchor simulates one layer (a kernel call a layer, unlooped) or at least 4 (the loop's "
                         "steady state is between the first and the last)")
    source = spec.tiers[0].name
    busy = compute_bound(model, shape, spec)
    want = tiles_max if busy else max(1, min(tiles_max, DECODE_TILES, shape.tokens // decode_tile))
    while True:  # as a compiler would: a step whose buffers fit no MU of the policy's runs in finer tiles
        plan = step_plan(model, shape, spec, want, mapping or {})
        tiles = max(1, plan.num_tiles)
        if layers == 1:  # one kernel call: every tile of the layer, once
            iterations = 0
        elif busy:
            iterations = min(tiles, pipeline)
        elif tiles > 1:  # a pipelined memory-bound layer: its steady state spans a layer boundary or more
            iterations = min(layers * tiles, max(steady, 2 * tiles))
        else:
            iterations = 0
        lp = looped(plan, layers, FIRST, LAST, iterations=iterations)
        try:  # the local search cut short and no bound: the weights' streams, not the NoC, set a step's pace
            placement = place_on_grid(lp, spec, cfg.seed, cfg.policy.room(cfg.mu), stream_bytes=stream_bytes,
                                      rounds=2, bound=False,
                                      by_bytes=(tiles > 1 and not busy) if by_bytes is None else by_bytes,
                                      by_io=True, min_share=MIN_SHARE, fit_slots=True)
            placement = plan_addresses(replace(placement, caches=()), spec.mu_bytes, "greedy")
            break
        except PlacementError as exc:
            if tile_tokens(shape.tokens, want) <= 1:
                tried = f"{tiles} tile{'s' if tiles > 1 else ''}"
                raise ValueError(f"{model.name}: the step of {shape.tokens} tokens does not fit {spec.name} under "
                                 f"memory.policy = {cfg.policy.name}, not even in {tried} of 1 token a layer: "
                                 f"{exc}") from None
            want = 2 * want  # tokens a tile halved
    params = DataflowParams.from_plan(lp, placement, spec, 1, 0.0, Homes(source, source, source), True, multicast)
    ran = _run(replace(cfg, workload=params, trace=False, memory_map_cycle=-1))
    end, ends = ran.end, ran.ends
    cus = sum(len(k.cus) for k in placement.partitions[0].kernels)
    lb, lf = _plan_cost(plan)
    bw = spec.tiers[0].bytes_per_cycle(spec.clock_hz)
    roof = max(lb / bw, lf / (spec.cu_count * spec.cu_flops_per_cycle))
    period = _period(ends, end, tiles, layers, busy, lb / bw, lf / (spec.cu_count * spec.cu_flops_per_cycle))
    return StepPlanRun(shape, tiles, cus, lp.num_tiles, end, period, roof, plan.status, ran.sent, ends, ran.oom,
                       ran.memory)


def _period(ends: tuple[int, ...], end: int, tiles: int, layers: int, busy: bool, stream: float,
            compute: float) -> float:
    """Cycles an iteration adds to a pass (``stream``, ``compute``: the layer's bytes over the tier's
    bandwidth and its FLOPs over the chip's peak, in cycles; module docstring)."""
    if layers == 1:  # a call a layer: every layer costs the whole pass (cycles_for(n) = n x end)
        return end / tiles
    if busy:  # the pipeline's steady state: its last few tiles' spacing, at least a tile's FLOPs over the
        # chip's peak (no stage of a steady pipeline beats it; a pipeline not yet steady can space a few tiles
        # closer: a 4,096-token prompt's last four came 11 % under it)
        k = min(4, len(ends) - 1)
        return max((ends[-1] - ends[-1 - k]) / k, compute / tiles)
    if tiles > 1:  # the later half's mean spacing, at least a tile's share of the layer's bytes over the bandwidth
        k = len(ends) // 2
        return max((ends[-1] - ends[-1 - k]) / k, stream / tiles)
    # the mean layer from the first layer's end to the last but one's, at least the layer's bytes over the
    # tier's bandwidth (module docstring)
    return max((ends[-2] - ends[0]) / (len(ends) - 2), stream)


def _plan_cost(plan: MappingPlan) -> tuple[float, float]:
    """(bytes, FLOPs) of one layer of a one-layer plan as simulated: streamed weights, cache traffic."""
    return (sum(k.weight_bytes + k.extra_dram_bytes for k in plan.kernels), sum(k.flop for k in plan.kernels))


@dataclass(frozen=True)
class PassRun:
    """One simulated pass of an anchor's looped plan."""

    end: int  # cycles from the start to the pass's end
    ends: tuple[int, ...]  # the cycle each iteration's tile left the loop's last kernel
    sent: int  # messages sent
    oom: int  # times an MU ran out of memory
    memory: PlanMemory  # its MUs' bytes and its tier traffic over [0, end)


def _run(cfg) -> PassRun:
    """Simulate one pass of a looped dataflow ChipConfig on the whole chip in this process.
    ValueError if the pass fails or never ends."""
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
    last: dict[int, int] = {}  # iteration -> the cycle its tile was written, by the last of its CUs
    for x in shard.logged:
        if isinstance(x, CarriedTile):
            last[x.tile] = max(last.get(x.tile, 0), x.cycle)
    oom = sum(mu.stats.oom_events for mu in shard.mus())
    end = int(passes[-1].end)
    return PassRun(end, tuple(last[k] for k in sorted(last)), int(shard.sent_count.sum()), oom,
                   _memory(shard, end))


def _memory(shard, end: int) -> PlanMemory:
    """The pass's MU occupancy (sim/chip/occupancy.py) over [0, end) as shares of the chip's MU bytes,
    and its first tier's bytes and flows."""
    from sim.chip import occupancy

    mus = shard.mus()
    cap = len(mus) * shard.cfg.spec.mu_bytes
    first_oom = min((mu.first_oom for mu in mus if mu.first_oom >= 0), default=-1)
    report = shard.occupancy.finish()
    end = max(end, report.last_cycle + 1, 1)  # the buffers freed after the pass's last tile count too
    occ = occupancy.figures([report], end, first_oom)
    source = shard.cfg.spec.tiers[0].name
    tier = [t for t in shard.flow_units() if t.tier is not None and t.tier.name == source]
    span = cap * end
    return PlanMemory(occ.peak_used / cap, occ.used_integral / span, occ.peak_reserved / cap,
                      occ.reserved_integral / span, sum(t.bytes_read + t.bytes_written for t in tier),
                      sum(t.flow_count for t in tier))

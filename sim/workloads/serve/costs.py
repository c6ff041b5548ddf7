"""What a serving step costs: its roofline times the efficiency its anchor's simulated plan reached.

``StepCosts.cycles(shape)``: the step's roofline (shapes.py, exact for its shape) times
``E``, the anchor's simulated cycles over the anchor's roofline for the model's layers
(anchors.py: the anchor's plan mapped, kernel-looped and simulated cycle by cycle on the
chip). At an anchor the price is its simulation; between anchors the roofline carries the
shape's own bytes and FLOPs and the anchor's plan its overheads (pipeline fill and drain,
the carried layer dependency, the placement's NoC traffic, the tier's flow sharing). The
output head, once a step, is priced at the same ``E``.

A compute-bound anchor whose cached K/V are a small part of its bytes (below ``1 / context_ratio``
of the rest: a prompt chunk beside a few decode sequences) is the anchor without them: its
compute hides them, so its E is the prompt's (measured on sn40l, Llama-3.1-8B, 1,024 prompt
tokens in 32 tiles, on the anchors' plans before multicast: E 0.987 with none cached, 1.000
with 1,024 cached tokens read, the spread of the pipeline's spacing estimate), and a run
prices such steps from one anchor where it simulated one per decode context (the example's 11
anchors were 8 with this rule). A memory-bound one keeps them: batch-1 decode's E was 1.06 at
1,024 cached tokens and 1.16 at 4,096 on those plans (1.008 at 1,024 on today's).

Anchors are simulated the first time a step needs them and kept for the run; each is a pure
function of the chip, the run's memory policy, protocol and NoC, the model and the anchor
shape, so every shard and backend prices alike, and a step cache (cache.py) lets later runs
take them instead of simulating them again. Being pure, they can also be simulated ahead and
side by side: at the first anchor a run needs, a planning pass (prefetch.py) replays the run
with every step at its roofline, notes the anchors it asks for and simulates them in
``workers`` processes at once; a step then takes its anchor from there, and one the planning
pass did not foresee is simulated when needed, as without it. Either way every price is the
same, so the run's steps and result hash are too.

A run shown with progress (a ``sink``, progress.py) tells it the planning pass, each anchor's
start and end and the anchors dropped; it runs the planning pass even with one worker (its
anchors then simulated one at a time as steps need them), so the line can count them and say
how long they will take. Nothing it tells changes a price.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from mapping.models import ModelSpec
from sim.workloads.serve import anchors as simulated
from sim.workloads.serve import cache
from sim.workloads.serve.anchors import StepPlanRun, compute_bound
from sim.workloads.serve.figures import AnchorLog, StepAnchor
from sim.workloads.serve.prefetch import Ahead, Keys, Simulated, simulate, workers
from sim.workloads.serve.progress import (
    AnchorDone,
    AnchorDropped,
    AnchorStarted,
    Planned,
    Planning,
    ProgressSink,
    start_up,
)
from sim.workloads.serve.progress import planned as predicted
from sim.workloads.serve.shapes import Roofline, StepShape, anchor, layer_cost, roofline

# every constant an anchor's simulation reads: part of its step-cache key
DEPTH = (simulated.LAYERS, simulated.PIPELINE, simulated.DECODE_TILE, simulated.DECODE_TILES, simulated.STEADY,
         simulated.MIN_SHARE)


# The unlooped baseline's synchronisation at each kernel call (a layer): "Kernel Looping" (Koeplinger
# et al. 2024, arXiv 2410.23668, abstract) names synchronisation at layer boundaries as the cost looping
# removes but the sources read give no figure for it on SN40L; chosen here as a GPU kernel launch's few
# microseconds, and benchmarks/node_scale.py prints the speedups across 0-20 us beside the paper's.
CALL_SYNC = 5e-6


def unlooped_efficiency(run: StepPlanRun, layers: int, sync_cycles: float) -> float:
    """E of the step run as a kernel call a layer, from its unlooped anchor (one layer simulated alone:
    its pipeline filled and drained, no next layer's weights streaming under it; anchors.py) and a
    synchronisation a call."""
    return (run.cycles_for(layers) + layers * sync_cycles) / (layers * run.roofline_layer)


@dataclass(frozen=True)
class CostOptions:
    """How anchors are chosen and simulated (config keys of the serve workload)."""

    ratio: float = 4.0  # anchors' tokens at powers of this (shapes.anchor)
    context_ratio: float = 16.0  # their pairs and cached tokens per token at powers of this
    tiles: int = 32  # tiles a layer at most (a compute-bound anchor's)
    stream_bytes: int = 64 * 1024  # a streaming kernel's weight bytes a CU at least
    map_seconds: float = 60.0  # the MILP's time limit per anchor
    cache: str = ""  # a step cache file (cache.py); empty: none
    workers: int = 0  # processes simulating anchors at once (prefetch.workers: 0 is this machine's cores)
    roofline_only: bool = False  # every step at its roofline, its anchors noted, not simulated: the planning pass
    looping: bool = True  # the layers one looped kernel call (Kernel Looping); false: a call a layer
    call_sync_seconds: float = CALL_SYNC  # looping false: a kernel call's synchronisation (chosen, not published)


class StepCosts:
    """A run's step prices, its anchors simulated as steps need them (module docstring).
    ``planner``: the anchors the run will ask for, for the planning pass (prefetch.py; None:
    each simulated when first needed); ``sink``: who shows the run's progress (progress.py; None: nobody)."""

    def __init__(self, cfg, model: ModelSpec, options: CostOptions = CostOptions(),
                 planner: Callable[[], list[StepShape]] | None = None, sink: ProgressSink | None = None):
        self.cfg = cfg
        self.sink = sink
        self.foreseen: set[StepShape] = set()  # anchors the planning pass told the sink of, not yet simulated
        self.model = model
        self.options = options
        self.planner = planner
        spec = cfg.spec
        self.bytes_per_cycle = spec.tiers[0].bytes_per_cycle(spec.clock_hz)
        self.flops_per_cycle = float(spec.cu_count * spec.cu_flops_per_cycle)
        self.anchors: dict[StepShape, StepPlanRun] = {}
        self.logs: list[AnchorLog] = []
        self.planned = False  # the planning pass run (at the first anchor not cached)
        self.ahead: Ahead | None = None  # its anchors, simulated in worker processes
        self.wanted: dict[StepShape, None] = {}  # roofline_only: the anchors asked for, in order
        self.priced_by: dict[tuple[int, int, int], StepShape] = {}  # a step's (tokens, keys, kv_read) -> its anchor

    def efficiency(self, shape: StepShape) -> float:
        """E of the anchor pricing ``shape``, simulating it first (or taking it from the step
        cache or the planning pass) if no step needed it before; 1 under ``roofline_only``."""
        a = self.anchor_of(shape)
        if self.options.roofline_only:
            self.wanted.setdefault(a)
            return 1.0
        if self.ahead:  # the sink told of the workers' anchors finished since the last step
            self.ahead.poll()
        run = self.anchors.get(a)
        if run is None:
            keys = self._keys(a)
            got = self.ahead.pop(a) if self.ahead else None  # its worker stored it: this run simulated it
            if got is None:
                hit = self._stored(keys)
                if hit is not None:
                    got = Simulated(hit, 0.0, cached=True)
                    if self.sink is not None and a in self.foreseen:  # stored by another process meanwhile
                        self.sink(AnchorDone(a, 0.0, cached=True))
                else:
                    if not self.planned:
                        self.planned, self.ahead = True, self._simulate_ahead()
                    got = (self.ahead and self.ahead.pop(a)) or self._simulate(a, keys)
            self.foreseen.discard(a)
            run = got.result()
            self.anchors[a] = run
            self.logs.append(self._log(run, got, self._key_of(run, keys), cached=got.cached))
        if not self.options.looping:
            return unlooped_efficiency(run, self.model.layers, self.options.call_sync_seconds * self.cfg.spec.clock_hz)
        return run.efficiency(self.model.layers)

    def _keys(self, a: StepShape) -> Keys:
        depth = DEPTH if self.options.looping else (1,) + DEPTH[1:]  # unlooped: one layer alone (anchors.py)
        return Keys(cache.key(self.cfg, self.model, self.options, a, depth),
                    cache.key(self.cfg, self.model, self.options, a, depth, oom=True))

    @staticmethod
    def _key_of(run: StepPlanRun, keys: Keys) -> str:
        """The key the step cache holds ``run`` under (cache.once)."""
        return keys.with_oom if run.oom_events else keys.plain

    def _stored(self, keys: Keys) -> StepPlanRun | None:
        """The anchor the step cache holds, if it has one and there is a cache."""
        if not self.options.cache:
            return None
        e = cache.find(self.options.cache, keys.plain, keys.with_oom)
        return None if e is None else cache.run_of(e)

    def _simulate(self, a: StepShape, keys: Keys) -> Simulated:
        """The anchor ``a`` simulated in this process now (a step needs it), the sink told."""
        if self.sink is not None:
            (told,) = predicted(self.model, [a], self.cfg.spec, self.options.tiles)
            self.sink(AnchorStarted(told))
        got = simulate(self.cfg, self.model, a, self.options, keys)
        if self.sink is not None:
            self.sink(AnchorDone(a, got.wall_seconds, got.cached))
        return got

    def _simulate_ahead(self) -> Ahead | None:
        """The planning pass's anchors this run has not got, set to simulate side by side (prefetch.py);
        with one worker, run only for a sink (its anchors are then simulated as steps need them)."""
        n = workers(self.options.workers)
        if self.planner is None or (n <= 1 and self.sink is None):
            return None
        if self.sink is not None:
            self.sink(Planning())
        todo = [a for a in self.planner() if a not in self.anchors and self._stored(self._keys(a)) is None]
        side = n > 1 and len(todo) > 1
        if self.sink is not None:
            order = Ahead.order(self.cfg, self.model, todo) if side else todo
            self.foreseen = set(todo)
            self.sink(Planned(predicted(self.model, order, self.cfg.spec, self.options.tiles), n if side else 1,
                              start_up()))
        keys = {a: self._keys(a) for a in todo}
        return Ahead(self.cfg, self.model, todo, self.options, n, keys, self.sink) if side else None

    def _log(self, run: StepPlanRun, got: Simulated, key: str, cached: bool = False, used: bool = True) -> AnchorLog:
        a, layers, mem = run.shape, self.model.layers, run.memory
        return AnchorLog(a.tokens, a.keys, a.kv_read, run.tiles, run.cus, run.iterations, run.end, run.per_iteration,
                         run.roofline_layer, run.cycles_for(layers), layers * run.roofline_layer,
                         run.efficiency(layers), run.messages, run.plan_status, got.wall_seconds, cached, key,
                         got.ahead, used, mem.mu_peak, mem.mu_mean, mem.mu_reserved_peak, mem.mu_reserved_mean,
                         mem.tier_bytes, mem.tier_flows)

    def finish(self) -> list[AnchorLog | StepAnchor]:
        """The run's anchors: those its steps were priced by, then those the planning pass simulated
        that none needed (``used`` false); its workers stopped; then which anchor priced each step shape."""
        left = self.ahead.close() if self.ahead else {}
        self.ahead = None
        if self.sink is not None:  # foreseen, never needed nor simulated: the count of anchors drops them
            for a in self.foreseen - set(left):
                self.sink(AnchorDropped(a))
        self.foreseen = set()
        unused = [self._log(got.run, got, self._key_of(got.run, self._keys(a)), cached=got.cached, used=False)
                  for a, got in left.items() if got.run is not None]
        links = [StepAnchor(*k, (a.tokens, a.keys, a.kv_read)) for k, a in self.priced_by.items()]
        return [*self.logs, *unused, *links]

    def anchor_of(self, shape: StepShape) -> StepShape:
        """The anchor pricing ``shape`` (shapes.anchor), without its cached K/V when it is
        compute-bound and they are under ``1 / context_ratio`` of its other bytes (module docstring)."""
        o = self.options
        a = anchor(StepShape(shape.tokens, shape.keys, shape.kv_read), o.ratio, o.context_ratio)
        if a.kv_read and o.context_ratio > 1:
            bare = replace(a, kv_read=0)
            rest = layer_cost(self.model, bare)[0]
            kv = layer_cost(self.model, a)[0] - rest
            if kv * o.context_ratio < rest and compute_bound(self.model, a, self.cfg.spec):
                return bare
        return a

    def price(self, shape: StepShape) -> tuple[int, Roofline]:
        """The step's cycles, its roofline (layers and head) times its anchor's efficiency, and
        that roofline; the anchor noted as its shape's (``finish``)."""
        r = roofline(self.model, shape, self.bytes_per_cycle, self.flops_per_cycle)
        cycles = max(1, math.ceil(r.cycles * self.efficiency(shape)))
        seen = (shape.tokens, shape.keys, shape.kv_read)
        if seen not in self.priced_by and not self.options.roofline_only:
            self.priced_by[seen] = self.anchor_of(shape)
        return cycles, r

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
take them instead of simulating them again.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from mapping.models import ModelSpec
from sim.workloads.serve import cache
from sim.workloads.serve.anchors import LAYERS, PIPELINE, StepPlanRun, compute_bound, simulate_anchor
from sim.workloads.serve.figures import AnchorLog
from sim.workloads.serve.shapes import Roofline, StepShape, anchor, layer_cost, roofline


@dataclass(frozen=True)
class CostOptions:
    """How anchors are chosen and simulated (config keys of the serve workload)."""

    ratio: float = 4.0  # anchors' tokens at powers of this (shapes.anchor)
    context_ratio: float = 16.0  # their pairs and cached tokens per token at powers of this
    tiles: int = 32  # tiles a layer at most (a compute-bound anchor's)
    stream_bytes: int = 64 * 1024  # a streaming kernel's weight bytes a CU at least
    map_seconds: float = 60.0  # the MILP's time limit per anchor
    cache: str = ""  # a step cache file (cache.py); empty: none


class StepCosts:
    """A run's step prices, its anchors simulated as steps need them (module docstring)."""

    def __init__(self, cfg, model: ModelSpec, options: CostOptions = CostOptions()):
        self.cfg = cfg
        self.model = model
        self.options = options
        spec = cfg.spec
        self.bytes_per_cycle = spec.tiers[0].bytes_per_cycle(spec.clock_hz)
        self.flops_per_cycle = float(spec.cu_count * spec.cu_flops_per_cycle)
        self.anchors: dict[StepShape, StepPlanRun] = {}
        self.logs: list[AnchorLog] = []
        self.cached: dict[str, dict] | None = None  # the step cache's anchors, read at the first

    def efficiency(self, shape: StepShape) -> float:
        """E of the anchor pricing ``shape``, simulating it first (or taking it from the step
        cache) if no step needed it before."""
        a = self.anchor_of(shape)
        run = self.anchors.get(a)
        if run is None:
            t0 = time.perf_counter()
            o = self.options
            k = cache.key(self.cfg, self.model, o, a, (LAYERS, PIPELINE))
            if self.cached is None:
                self.cached = cache.read(o.cache) if o.cache else {}
            hit = self.cached.get(k)
            if hit is not None:
                run = StepPlanRun(a, hit["tiles"], hit["cus"], hit["iterations"], hit["end"], hit["per_iteration"],
                                  hit["roofline_layer"], hit["plan_status"], hit["messages"])
            else:
                run = simulate_anchor(self.cfg, self.model, a, o.tiles, o.stream_bytes, {"time_limit": o.map_seconds})
            self.anchors[a] = run
            layers = self.model.layers
            self.logs.append(AnchorLog(a.tokens, a.keys, a.kv_read, run.tiles, run.cus, run.iterations, run.end,
                                       run.per_iteration, run.roofline_layer, run.cycles_for(layers),
                                       layers * run.roofline_layer, run.efficiency(layers), run.messages,
                                       run.plan_status, 0.0 if hit else time.perf_counter() - t0, hit is not None, k))
        return run.efficiency(self.model.layers)

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
        that roofline."""
        r = roofline(self.model, shape, self.bytes_per_cycle, self.flops_per_cycle)
        return max(1, math.ceil(r.cycles * self.efficiency(shape))), r

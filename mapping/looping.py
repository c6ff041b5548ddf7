"""Kernel looping: a plan of one layer run for many layers in one pass, the layers a loop.

"Kernel Looping" (Koeplinger et al., arXiv 2410.23668, 2024) runs an LLM's decoder layers on
SN40L as iterations of one configured loop instead of one kernel call per layer, so nothing
synchronises between layers: the next layer's weights stream in while the current one
computes. ``looped`` turns a single-partition plan of one layer (T tiles a pass) into the
plan of ``layers`` of them: a pass is ``layers x T`` iterations of the same kernels on the
same CUs, each layer streaming its own weights (and reading its own caches), and the layer's
output is carried round to its input: the ``last`` kernel's tile i feeds the ``first``
kernel's tile i + T (a loop-carried tile buffer, ``TensorPlan.lag = T``), so a layer's tile
cannot start before the layer below has finished that tile.

Per tile nothing changes (FLOPs, bytes, tile buffers); per pass everything is ``layers``
times the layer's.
"""

from __future__ import annotations

from dataclasses import replace

from mapping.plan import MappingPlan, TensorPlan


def looped(plan: MappingPlan, layers: int, first: str, last: str, iterations: int = 0) -> MappingPlan:
    """``plan`` (one partition holding one layer) run for ``layers`` layers as a loop, ``last``'s
    output carried to ``first``'s input (module docstring); ``iterations`` (0: every one, layers x
    tiles) cuts the pass after that many tiles (a pipeline's steady state is reached long before a
    long layer ends). ValueError if it has several partitions (a loop runs one configuration)."""
    if layers < 1:
        raise ValueError(f"a loop runs at least one layer, got {layers}")
    if len(plan.partitions) != 1:
        raise ValueError(f"kernel looping runs one partition; the plan has {len(plan.partitions)} (its layer does "
                         "not fit the chip at once: give it fewer tokens per tile)")
    by_name = {k.name: k for k in plan.kernels}
    for name in (first, last):
        if name not in by_name:
            raise ValueError(f"the plan has no kernel {name!r}")
    tiles = max(1, plan.num_tiles)
    n = min(iterations, tiles * layers) if iterations > 0 else tiles * layers
    f = n / tiles  # the pass's share of a layer's totals
    out = by_name[last]
    carried = TensorPlan(last, first, 1, float(out.outer * out.m * out.n * plan.word), tiles + 2, True, lag=tiles)
    kernels = tuple(replace(k, tiles=n, flop=k.flop * f, weight_bytes=k.weight_bytes * f,
                            extra_dram_bytes=k.extra_dram_bytes * f) for k in plan.kernels)
    parts = tuple(replace(p, compute_seconds=p.compute_seconds * f, memory_seconds=p.memory_seconds * f,
                          network_seconds=p.network_seconds * f, seconds=p.seconds * f)
                  for p in plan.partitions)
    return replace(plan, kernels=kernels, partitions=parts, tensors=plan.tensors + (carried,),
                   num_tiles=n, layers_per_stage=1, seconds_per_batch=plan.seconds_per_batch,
                   units_per_pass=round(plan.units_per_pass * f))

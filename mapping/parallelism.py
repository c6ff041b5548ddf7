"""Degrees of parallelism: enumerate TP x PP x DP (x copies) over the topology's dimensions,
with micro-batch and tile sizes, and the end-to-end time multiplier each implies.

With these fixed outside the MILP every slice size is a constant, so the intra-chip
problem stays linear (DFModel instead multiplies them inside a non-convex model).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from mapping.systems import NetworkDim, Parallelism, System
from mapping.workload import Scheme, Workload


@dataclass(frozen=True)
class Candidate:
    """One point of the outer enumeration; ``seconds = multiplier * sum_c T_c + p2p``."""

    sizes: tuple[int, ...]
    tp: int
    pp: int
    dp: int
    micro_batch: int
    tile_size: int
    num_tiles: int
    layers_per_stage: int
    num_micro_batches: int
    pipeline_factor: float
    multiplier: float
    p2p_seconds: float


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def pipeline_factor(pp: int, num_micro_batches: int, layers_per_stage: int) -> float:
    """Bubble factor 1 + (PP-1) / (micro-batches * c), c = layers_per_stage - 1 (or 1).

    DFModel's latest formula: with several layers per stage the bubble is spread over
    the stage's layer boundaries (an interleaved schedule).
    """
    c = layers_per_stage - 1 if layers_per_stage - 1 >= 1 else 1
    return 1.0 + (pp - 1) / (num_micro_batches * c)


def network_sizes(system: System, chips_per_copy: int) -> list[tuple[int, ...]]:
    """Every assignment of the free (size 0) dimensions whose product is ``chips_per_copy``."""
    fixed = [d.size for d in system.network]
    known = math.prod(s for s in fixed if s)
    if chips_per_copy % known:
        return []
    free = [i for i, s in enumerate(fixed) if not s]
    out = []
    for combo in itertools.product(divisors(chips_per_copy // known), repeat=len(free)):
        if math.prod(combo) * known == chips_per_copy:
            sizes = list(fixed)
            for i, s in zip(free, combo):
                sizes[i] = s
            out.append(tuple(sizes))
    return out


def group_sizes(network: tuple[NetworkDim, ...], sizes: tuple[int, ...], scheme: Scheme) -> tuple[int, int, int]:
    """(TP, PP, DP) of a network whose dimension sizes are ``sizes``."""
    if scheme is Scheme.DATA_PARALLEL:
        return 1, 1, math.prod(sizes)
    if scheme is not Scheme.TENSOR_PARALLEL:
        return 1, 1, 1
    size_of = {p: math.prod(s for d, s in zip(network, sizes) if d.parallelism is p) for p in Parallelism}
    return size_of[Parallelism.TP], size_of[Parallelism.PP], size_of[Parallelism.DP]


def check_network(system: System, scheme: Scheme) -> list[str]:
    """Problems with the parallelism labels (TP and PP may each use one dimension)."""
    if scheme is not Scheme.TENSOR_PARALLEL:
        return []
    out = []
    for p in (Parallelism.TP, Parallelism.PP):
        dims = [i for i, d in enumerate(system.network) if d.parallelism is p]
        if len(dims) > 1:
            out.append(f"{p.value} is assigned to {len(dims)} network dimensions {dims}; at most one is supported")
    return out


def pp_bandwidth(system: System) -> float:
    return next((d.link_bandwidth for d in system.network if d.parallelism is Parallelism.PP), math.inf)


def candidates(workload: Workload, system: System) -> tuple[list[Candidate], list[str]]:
    """All valid candidates and the reasons others were skipped."""
    chips_per_copy, rem = divmod(system.chips, workload.copies)
    if rem:
        return [], [f"{system.chips} chips cannot form {workload.copies} equal copies"]
    skipped: list[str] = []
    out: list[Candidate] = []
    all_sizes = network_sizes(system, chips_per_copy)
    if not all_sizes:
        return [], [f"no network shape with {chips_per_copy} chips per copy fits the fixed dimension sizes"]
    tiles = [workload.tile_size] if workload.tile_size else divisors(workload.tiled_extent)
    for sizes in all_sizes:
        tp, pp, dp = group_sizes(system.network, sizes, workload.scheme)
        repeats = workload.graph_repeats
        if pp > repeats:
            skipped.append(f"PP={pp} exceeds the {repeats} layer(s) to pipeline")
            continue
        lps = -(-repeats // pp)
        per_dp, rem = divmod(workload.global_batch, dp)
        if rem:
            skipped.append(f"global batch {workload.global_batch} is not divisible by DP={dp}")
            continue
        batches = [workload.micro_batch] if workload.micro_batch else divisors(per_dp)
        for mb in batches:
            if per_dp % mb:
                skipped.append(f"global batch / DP = {per_dp} is not divisible by micro-batch {mb}")
                continue
            n_micro = per_dp // mb
            pf = pipeline_factor(pp, n_micro, lps) if workload.batched else 1.0
            multiplier = pf * lps * workload.global_batch / dp if workload.batched else 1.0
            p2p = 0.0
            if pp > 1 and workload.pipeline_bytes_per_layer:
                # DFModel: p2p = 2*h*s*w * layers / BW_PP, added once per batch
                p2p = workload.pipeline_bytes_per_layer * workload.layers / pp_bandwidth(system)
            for tile in tiles:
                num_tiles = -(-workload.tiled_extent // tile)
                out.append(Candidate(tuple(sizes), tp, pp, dp, mb, tile, num_tiles, lps, n_micro, pf,
                                     multiplier / workload.copies, p2p / workload.copies))
    return out, skipped

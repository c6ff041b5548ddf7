"""Per-kernel and per-tensor constants for one parallelism candidate: slice sizes, compute,
memory and network seconds, SRAM and DRAM bytes. The result is a PartitionProblem.

Slice sizes follow DFModel: M includes the outer (batch) dimension; the split
dimension is divided by its group (ceil); the tiled dimension is divided by the
number of tiles; per-tile quantities are multiplied back by the tile count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from mapping import collectives as coll
from mapping.graph import CollectiveKind, Dim, Kernel, buffer_depths, edge_index, kernels
from mapping.interchip import SplitPlan
from mapping.parallelism import Candidate
from mapping.partition import PartitionProblem
from mapping.systems import LinkKind, Parallelism, System
from mapping.workload import Scheme, Workload

TP_KINDS = (CollectiveKind.ALL_REDUCE, CollectiveKind.ALL_GATHER, CollectiveKind.ALL_TO_ALL)


@dataclass(frozen=True)
class ExecutionModel:
    """How partitions run on a chip (the DFModel execution options)."""

    kernel_by_kernel: bool = False
    partitions: int | None = None  # None: as many as kernels
    overlap: bool = True  # partition time = max(compute, memory, network), else their sum
    detailed_compute: bool = False  # lanes x stages cycle model instead of the roofline
    utilization: float = 0.9  # roofline efficiency
    stream_weights: bool = True
    # weights live off chip (a memory tier) and stream in every pass, each kernel's a slice per
    # tile: none takes SRAM, each pass moves them all (their bytes join the memory term)
    weights_off_chip: bool = False
    # 1: DFModel's latest formula set, (p-1)/(p*BW) per byte; 2: reduce-scatter + all-gather,
    # the convention of the published Megatron-145B run
    all_reduce_passes: int = 1
    # DFModel enforces SRAM capacity only for LLM and DLRM; its HPL and FFT runs stream freely
    sram_limit: bool = True


@dataclass(frozen=True)
class KernelSlice:
    """One kernel's per-chip, per-tile dimensions and tile count."""

    m: int
    k: int
    n: int
    tiles: int
    share: float = 1.0  # of the whole kernel's work this chip does (before tiling)

    def extra_dram_bytes(self, kernel: Kernel) -> float:
        """This chip's share of the kernel's extra DRAM traffic: a KV cache read by heads split
        over the TP group is read a share of the heads on each chip."""
        return kernel.extra_dram_bytes * self.share

    def flop(self, kernel: Kernel) -> float:
        return 2.0 * self.m * self.k * self.n if kernel.is_gemm else float(self.m * self.n)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def slice_kernel(kernel: Kernel, dim: Dim, scheme: Scheme, cand: Candidate, chips_per_copy: int) -> KernelSlice:
    m, k, n = kernel.outer * kernel.m, kernel.k, kernel.n
    if scheme is Scheme.TENSOR_PARALLEL:
        if dim in (Dim.OUTER, Dim.M):
            m = _ceil(m, cand.tp)
        elif dim is Dim.K:
            k = _ceil(k, cand.tp)
        elif dim is Dim.N:
            n = _ceil(n, cand.tp)
    elif scheme is Scheme.HPL:
        x, y = hpl_grid(cand.sizes)
        m, k = _ceil(m, x), _ceil(k, y)
    elif scheme is Scheme.FFT:
        n = _ceil(n, chips_per_copy)
    share = (m * k * n) / (kernel.outer * kernel.m * kernel.k * kernel.n)
    tiled = {Dim.OUTER: "m", Dim.M: "m", Dim.K: "k", Dim.N: "n"}.get(kernel.tiled)
    tiles = 1
    if tiled:
        extent = {"m": m, "k": k, "n": n}[tiled]
        tiles = min(cand.num_tiles, extent)
        per_tile = _ceil(extent, tiles)
        m, k, n = (per_tile if tiled == "m" else m, per_tile if tiled == "k" else k, per_tile if tiled == "n" else n)
    return KernelSlice(m, k, n, tiles, share)


def hpl_grid(sizes: tuple[int, ...]) -> tuple[int, int]:
    """(X, Y) process grid of HPL: dimension 0 and dimension 1 (the last two for 3-D)."""
    if len(sizes) == 1:
        return 1, sizes[0]
    if len(sizes) == 2:
        return sizes[0], sizes[1]
    return sizes[0] * sizes[1], sizes[2]


def core_options(kernel: Kernel, s: KernelSlice, width: int, height: int, cores: int,
                 frequency: float) -> tuple[np.ndarray, np.ndarray]:
    """Pareto (cores, seconds) of the lanes x stages model for core budgets 1, 2, 4, ..., all.

    SIMD: ceil(M / (lanes*W)) * N cycles. Systolic: ceil(M / (lanes*W)) * ceil(N /
    (stages*H)) * K cycles, with lanes * stages <= budget (DFModel's detailed model).
    """
    budgets = sorted({min(cores, 2**i) for i in range(int(math.log2(cores)) + 1)} | {cores})
    used, secs = [], []
    for b in budgets:
        lanes = np.arange(1, b + 1)
        m_steps = np.ceil(s.m / (lanes * width))
        if kernel.is_gemm:
            stages = b // lanes
            cycles = m_steps * np.ceil(s.n / (stages * height)) * s.k
            best = int(np.argmin(cycles))
            used.append(int(lanes[best] * stages[best]))
        else:
            cycles = m_steps * s.n
            best = int(np.argmin(cycles))
            used.append(int(lanes[best]))
        secs.append(float(cycles[best]) * s.tiles / frequency)
    order = np.argsort(used, kind="stable")
    keep_c: list[int] = []
    keep_t: list[float] = []
    for i in order:  # Pareto: more cores only if strictly faster
        if not keep_t or secs[i] < keep_t[-1] - 1e-18:
            if keep_c and used[i] == keep_c[-1]:
                keep_t[-1] = secs[i]
            else:
                keep_c.append(used[i])
                keep_t.append(secs[i])
    return np.array(keep_c, dtype=float), np.array(keep_t)


def _dp_link(system: System, scheme: Scheme) -> tuple[LinkKind, float]:
    dims = system.network if scheme is Scheme.DATA_PARALLEL else \
        [d for d in system.network if d.parallelism is Parallelism.DP]
    if not dims:
        return LinkKind.RING, math.inf
    kind = LinkKind.FULLY_CONNECTED if all(d.kind is LinkKind.FULLY_CONNECTED for d in dims) else LinkKind.RING
    return kind, min(d.link_bandwidth for d in dims)


def network_seconds(graph: nx.DiGraph, workload: Workload, system: System, cand: Candidate,
                    splits: SplitPlan, slices: list[KernelSlice], all_reduce_passes: int = 1) -> np.ndarray:
    """(kernels, channels) seconds of collectives, charged to the partition of the kernel
    that issues them (for a layout change: the tensor's producer)."""
    ks = kernels(graph)
    word = graph.graph["word"]
    hpl = workload.scheme is Scheme.HPL
    out = np.zeros((len(ks), 2 if hpl else 1))
    tp_dim = next((d for d in system.network if d.parallelism is Parallelism.TP), None)
    dp_kind, dp_bw = _dp_link(system, workload.scheme)
    chips = system.chips // workload.copies
    sizes = list(cand.sizes)
    bws = [d.link_bandwidth for d in system.network]

    def tp_time(kind: CollectiveKind, i: int) -> float:
        if tp_dim is None:
            return 0.0
        s = slices[i]
        per_tile = s.m * s.n * word  # DFModel: per-tile output slice, times the tile count
        passes = all_reduce_passes if kind is CollectiveKind.ALL_REDUCE else 1
        return passes * per_tile * s.tiles * coll.seconds_per_byte(kind, tp_dim.kind, cand.tp, tp_dim.link_bandwidth)

    for i, kernel in enumerate(ks):
        kc = splits.kernel_collective[i]
        if kc is not None:
            out[i, 0] += tp_time(kc, i)
        for c in kernel.collectives:
            if c.kind in TP_KINDS:
                out[i, 0] += tp_time(c.kind, i)
            elif c.kind is CollectiveKind.DP_ALL_REDUCE:
                grad = slices[i].m * slices[i].n * word / cand.num_micro_batches  # amortised per micro-batch
                out[i, 0] += all_reduce_passes * grad * coll.seconds_per_byte(c.kind, dp_kind, cand.dp, dp_bw)
            elif c.kind is CollectiveKind.GLOBAL_ALL_TO_ALL:
                out[i, 0] += coll.global_all_to_all_seconds(c.bytes, system.shape, sizes, bws, chips)
            elif hpl:
                x, y = hpl_grid(cand.sizes)
                p2p, bcast = coll.hpl_panel_seconds(
                    c.bytes if c.kind is CollectiveKind.BROADCAST else 0.0,
                    c.bytes if c.kind is CollectiveKind.POINT_TO_POINT else 0.0,
                    x, y, bws[0], bws[1] if len(bws) > 1 else bws[0])
                out[i, 0] += p2p
                out[i, 1] += bcast
    _, edges = edge_index(graph)
    for (u, _), kind in zip(edges, splits.edge_collective):
        if kind is not None:
            out[u, 0] += tp_time(kind, u)
    return out


def partition_problem(workload: Workload, system: System, cand: Candidate, splits: SplitPlan,
                  model: ExecutionModel) -> tuple[PartitionProblem, list[KernelSlice]]:
    """Reduce one candidate to the constants of the partition problem."""
    graph = workload.graph
    ks = kernels(graph)
    chip = system.chip
    word = graph.graph["word"]
    chips_per_copy = system.chips // workload.copies
    slices = [slice_kernel(k, d, workload.scheme, cand, chips_per_copy) for k, d in zip(ks, splits.dims)]
    names, edge_list = edge_index(graph)
    edges = np.array(edge_list, dtype=np.int64).reshape(-1, 2)
    out_tile = np.array([s.m * s.n * word for s in slices], dtype=float)
    tiles = np.array([s.tiles for s in slices], dtype=float)
    flop = np.array([s.flop(k) * s.tiles for k, s in zip(ks, slices)])
    compute = flop / (model.utilization * chip.peak_flops)
    options = None
    if model.detailed_compute:
        options = tuple(core_options(k, s, chip.width, chip.height, chip.cores, chip.frequency)
                        for k, s in zip(ks, slices))
    weight = np.array([s.m * s.k * word if k.has_weight else 0.0 for k, s in zip(ks, slices)])
    weight_full = np.array([w * (s.tiles if k.tiled is Dim.K else 1) for k, s, w in zip(ks, slices, weight)])
    u = edges[:, 0]
    depth = np.array(buffer_depths(graph), dtype=float)
    mb = cand.micro_batch
    problem = PartitionProblem(
        names=tuple(names), edges=edges, backward=np.array([k.phase == "bwd" for k in ks]),
        compute=compute, core_options=options,
        network=network_seconds(graph, workload, system, cand, splits, slices, model.all_reduce_passes),
        kernel_memory=(np.array([s.extra_dram_bytes(k) for k, s in zip(ks, slices)])
                       + (weight_full if model.weights_off_chip else 0.0)) / chip.dram_bandwidth,
        weight_sram=weight,
        spill=out_tile[u] * tiles[u] / chip.dram_bandwidth,
        onchip_sram=out_tile[u] * depth, spill_sram=2.0 * out_tile[u],
        edge_dram=out_tile[u] * tiles[u] * mb,
        dram_fixed=float(weight_full.sum()) * cand.layers_per_stage + workload.resident_dram_bytes / chips_per_copy,
        sram_capacity=chip.sram_bytes if model.sram_limit else math.inf, dram_capacity=chip.dram_bytes,
        cores=chip.cores,
        partitions=len(ks) if model.kernel_by_kernel or not model.partitions else model.partitions,
        kernel_by_kernel=model.kernel_by_kernel, overlap=model.overlap,
        split_phases=workload.training and not model.kernel_by_kernel,
        stream_weights=model.stream_weights, weights_off_chip=model.weights_off_chip,
    )
    return problem, slices

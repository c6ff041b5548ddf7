"""The intra-chip partitioning problem as plain arrays, and the exact evaluation of an assignment.

Kernels run in C ordered partitions ("configs"), one after another; inside one
partition they form a spatial pipeline. For a kernel-to-partition assignment this
module computes what DFModel's MILP would: per-partition compute, memory and network
time, SRAM and DRAM use, and which capacity is broken. The MILP (mapping.intrachip)
and the heuristics (mapping.heuristics) both answer to this evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PartitionProblem:
    """Everything the partitioner needs, already reduced to constants (seconds, bytes).

    Per kernel (n): ``compute`` seconds (roofline) or ``core_options`` (detailed: per
    kernel the Pareto list of (cores, seconds)); ``network`` seconds per channel (the
    partition pays the slowest channel); ``kernel_memory`` extra DRAM seconds;
    ``weight_sram`` bytes. Per tensor (m): ``spill`` DRAM seconds paid by each partition
    it leaves or enters, ``onchip_sram`` (size x depth per tile) when both ends share a
    partition, ``spill_sram`` (2 x size per tile, DRAM staging) otherwise, and
    ``edge_dram`` bytes held in DRAM while it is live between partitions.
    """

    names: tuple[str, ...]
    edges: np.ndarray  # (m, 2) producer, consumer indices; kernel order is topological
    backward: np.ndarray  # (n,) bool
    compute: np.ndarray
    core_options: tuple[tuple[np.ndarray, np.ndarray], ...] | None
    network: np.ndarray  # (n, channels)
    kernel_memory: np.ndarray
    weight_sram: np.ndarray
    spill: np.ndarray
    onchip_sram: np.ndarray
    spill_sram: np.ndarray
    edge_dram: np.ndarray
    dram_fixed: float  # weights x layers per stage + resident data, bytes
    sram_capacity: float
    dram_capacity: float
    cores: int
    partitions: int
    kernel_by_kernel: bool = False
    overlap: bool = True
    split_phases: bool = False  # training dataflow: forward partitions before backward ones
    stream_weights: bool = True  # a kernel alone in its partition may slice its weight (DFModel)
    weights_off_chip: bool = False  # every weight streams from off chip: none takes SRAM

    @property
    def n(self) -> int:
        return len(self.names)

    def phase_window(self) -> tuple[int, int]:
        """(last partition forward kernels may use, first backward kernels may use)."""
        c = self.partitions
        if not self.split_phases:
            return c - 1, 0
        # DFModel: even C splits in half; odd C shares the middle partition
        return (c // 2 - 1, c // 2) if c % 2 == 0 else (c // 2, c // 2)

    def allowed(self, kernel: int) -> range:
        if self.kernel_by_kernel:
            return range(kernel, kernel + 1)
        last_fwd, first_bwd = self.phase_window()
        return range(first_bwd, self.partitions) if self.backward[kernel] else range(0, last_fwd + 1)


@dataclass(frozen=True)
class Evaluation:
    assignment: np.ndarray
    compute: np.ndarray
    memory: np.ndarray
    network: np.ndarray
    time: np.ndarray
    sram: np.ndarray
    dram_peak: float
    streamed: np.ndarray  # (n,) bool: kernel slices its weight (alone in its partition)
    violations: tuple[str, ...]

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def total(self) -> float:
        return float(self.time.sum())


def detailed_compute(options: tuple[tuple[np.ndarray, np.ndarray], ...], members: list[int], cores: int) -> float:
    """Smallest max-kernel time when ``members`` share ``cores`` (each picks a Pareto option)."""
    if not members:
        return 0.0
    levels = np.unique(np.concatenate([options[k][1] for k in members]))
    best = np.inf
    lo, hi = 0, len(levels) - 1
    while lo <= hi:  # binary search the makespan over the candidate times
        mid = (lo + hi) // 2
        need = 0
        for k in members:
            c, t = options[k]
            fit = c[t <= levels[mid] + 1e-15]
            need += fit.min() if fit.size else cores + 1
        if need <= cores:
            best, hi = levels[mid], mid - 1
        else:
            lo = mid + 1
    return float(best)


def evaluate(problem: PartitionProblem, assignment) -> Evaluation:
    """Times, capacities and violations of one kernel-to-partition assignment."""
    p = problem
    a = np.asarray(assignment, dtype=np.int64)
    c_count = max(p.partitions, int(a.max()) + 1 if a.size else 0)
    u, v = p.edges[:, 0], p.edges[:, 1]
    same = a[u] == a[v]
    count = np.bincount(a, minlength=c_count)
    streamed = np.zeros(p.n, dtype=bool)
    if p.weights_off_chip:
        streamed = p.weight_sram > 0
    elif p.stream_weights:
        streamed = (p.weight_sram > 0) & (count[a] == 1)

    def per_partition(values, where) -> np.ndarray:
        return np.bincount(where, weights=values, minlength=c_count).astype(float)

    crossing = ~same
    memory = per_partition(p.kernel_memory, a)
    memory += per_partition(p.spill[crossing], a[u][crossing]) + per_partition(p.spill[crossing], a[v][crossing])
    channels = np.stack([per_partition(p.network[:, h], a) for h in range(p.network.shape[1])], axis=1)
    network = channels.max(axis=1) if channels.size else np.zeros(c_count)
    if p.core_options is None:
        compute = per_partition(p.compute, a)
    else:
        compute = np.array([detailed_compute(p.core_options, list(np.flatnonzero(a == c)), p.cores)
                            for c in range(c_count)])
    time = np.maximum(np.maximum(compute, memory), network) if p.overlap else compute + memory + network

    out_spill = np.where(streamed[u], 0.0, p.spill_sram)
    sram = per_partition(p.onchip_sram[same], a[u][same])
    sram += per_partition(out_spill[crossing], a[u][crossing]) + per_partition(p.spill_sram[crossing], a[v][crossing])
    sram += per_partition(np.where(streamed, 0.0, p.weight_sram), a)

    live = np.zeros(c_count)
    for e in np.flatnonzero(crossing):
        live[a[u[e]]:a[v[e]] + 1] += p.edge_dram[e]
    dram_peak = p.dram_fixed + (live.max() if c_count else 0.0)

    violations = []
    for e in np.flatnonzero(a[u] > a[v]):
        violations.append(f"tensor {p.names[u[e]]} -> {p.names[v[e]]} flows from partition {a[u[e]]} back to {a[v[e]]}")
    for k in range(p.n):
        if a[k] not in p.allowed(k):
            violations.append(f"kernel {p.names[k]} may not run in partition {a[k]}")
    for c in np.flatnonzero(sram > p.sram_capacity * (1 + 1e-9)):
        violations.append(f"SRAM capacity: partition {c} needs {sram[c]:.4g} B of {p.sram_capacity:.4g} B")
    if p.core_options is None:
        for c in np.flatnonzero(count > p.cores):
            violations.append(f"compute units: partition {c} has {count[c]} kernels for {p.cores} cores")
    if dram_peak > p.dram_capacity * (1 + 1e-9):
        violations.append(f"DRAM capacity: {dram_peak:.4g} B needed of {p.dram_capacity:.4g} B")
    return Evaluation(a, compute, memory, network, time, sram, float(dram_peak), streamed, tuple(violations))


def time_lower_bound(problem: PartitionProblem) -> float:
    """A bound the sum of partition times can never beat: each kernel's own work, counted once."""
    p = problem
    if p.core_options is None:
        compute = float(p.compute.sum())
    else:  # at best a kernel has all cores; only alone (kernel by kernel) do the times add up
        fastest = [float(t.min()) for _, t in p.core_options]
        compute = sum(fastest) if p.kernel_by_kernel else max(fastest, default=0.0)
    # a partition pays its slowest channel, so the total is at least any channel's total
    network = float(p.network.sum(axis=0).max()) if p.n else 0.0
    memory = float(p.kernel_memory.sum())
    return max(compute, network, memory) if p.overlap else compute + network + memory

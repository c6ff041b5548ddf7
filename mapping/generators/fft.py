"""A large 1-D FFT as two GEMM-like passes over an n x n layout, n = sqrt(length) (DFModel's FFT)."""

from __future__ import annotations

import math

from mapping.generators.registry import GENERATORS
from mapping.graph import Collective, CollectiveKind, Dim, Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.workload import Scheme, Workload


def fft_reduction(n: int, radix: int) -> int:
    """The K of each pass: 4 * log_radix(n) * radix (DFModel's operation count per point)."""
    return int(4 * math.log2(n) / math.log2(radix) * radix)


@GENERATORS.register("fft")
def fft_workload(length: int, radix: int, word: int = 2, copies: int = 1, k: int | None = None,
                 name: str = "fft") -> Workload:
    """Two passes (M = N = sqrt(length)) with an all-to-all transpose of the whole array between them."""
    n = math.isqrt(length)
    k = k or fft_reduction(n, radix)
    total = float(n) * n * word
    graph = new_graph(name, word)
    add_kernel(graph, Kernel("Step_1", KernelKind.GEMM_WEIGHT, n, k, n, tiled=Dim.NONE))
    add_kernel(graph, Kernel("Step_2", KernelKind.GEMM_WEIGHT, n, k, n, tiled=Dim.NONE,
                             collectives=(Collective(CollectiveKind.GLOBAL_ALL_TO_ALL, total),)))
    connect(graph, "Step_1", "Step_2")
    return Workload(name=name, graph=graph, scheme=Scheme.FFT, batched=False, micro_batch=1,
                    tile_size=1, copies=copies, resident_dram_bytes=float(length) * word,
                    pass_unit="transforms")

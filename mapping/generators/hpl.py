"""HPL (LU factorisation) trailing-matrix updates as a chain of GEMMs (DFModel's HPL generator)."""

from __future__ import annotations

from mapping.generators.registry import GENERATORS
from mapping.graph import Collective, CollectiveKind, Dim, Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.workload import Scheme, Workload


@GENERATORS.register("hpl")
def hpl_workload(n: int, block: int, iterations: int, word: int = 2, copies: int = 1,
                 name: str = "hpl") -> Workload:
    """The first ``iterations`` panel steps of HPL on an n x n matrix with block size B.

    Step i (1-based) updates the trailing matrix of side n - (i-1)B: a GEMM with
    M = K = side and N = B, broadcasting and exchanging an M x B panel.
    """
    if (iterations - 1) * block >= n:
        raise ValueError(f"HPL: {iterations} iterations of block {block} exceed n = {n}")
    graph = new_graph(name, word)
    for i in range(iterations):
        side = n - i * block
        panel = float(side * block * word)
        add_kernel(graph, Kernel(
            f"Iteration_{i + 1}", KernelKind.GEMM, side, side, block, tiled=Dim.NONE,
            collectives=(Collective(CollectiveKind.BROADCAST, panel), Collective(CollectiveKind.POINT_TO_POINT, panel)),
        ))
        if i:
            connect(graph, f"Iteration_{i}", f"Iteration_{i + 1}")
    return Workload(name=name, graph=graph, scheme=Scheme.HPL, batched=False, micro_batch=1,
                    tile_size=1, copies=copies, resident_dram_bytes=float(n) * n * word,
                    pass_unit="panel steps", units_per_pass=iterations)

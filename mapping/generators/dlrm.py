"""DLRM forward + backward: bottom and top MLP stacks (DFModel's DLRM generator).

3L kernels for L MLPs (forward, backward, weight update each) and 4(L-1) tensors. The
last bottom MLP, forward and backward, carries the embedding all-to-all and touches
the pooled embedding rows in DRAM.
"""

from __future__ import annotations

from mapping.generators.registry import GENERATORS
from mapping.graph import Collective, CollectiveKind, Dim, Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.workload import Scheme, Workload


@GENERATORS.register("dlrm")
def dlrm_workload(mlp_dim: int, bottom_mlps: int, top_mlps: int, tables: int, pooled_rows: int,
                  emb_dim: int, rows: int, micro_batch: int, global_batch: int, word: int = 2,
                  copies: int = 1, name: str = "dlrm") -> Workload:
    """A data-parallel DLRM; ``global_batch / DP`` graph passes per batch, as published."""
    mlps = bottom_mlps + top_mlps
    if bottom_mlps < 1 or top_mlps < 0 or mlps < 2:
        raise ValueError("DLRM needs at least one bottom MLP and two MLPs in total")
    lookup = float(tables * pooled_rows * emb_dim * micro_batch * word)
    embedding = (Collective(CollectiveKind.GLOBAL_ALL_TO_ALL, lookup),)
    graph = new_graph(name, word)

    def mlp(i: int, phase: str) -> Kernel:
        bottom = i == bottom_mlps
        return Kernel(f"MLP_{i}" + ("" if phase == "fwd" else "_bwd"), KernelKind.GEMM_WEIGHT,
                      mlp_dim, mlp_dim, micro_batch, tiled=Dim.NONE, phase=phase,
                      collectives=embedding if bottom else (), extra_dram_bytes=lookup if bottom else 0.0)

    for i in range(1, mlps + 1):
        add_kernel(graph, mlp(i, "fwd"))
    for i in range(mlps, 0, -1):
        add_kernel(graph, mlp(i, "bwd"))
    for i in range(mlps, 0, -1):
        add_kernel(graph, Kernel(f"MLP_{i}_weight_update", KernelKind.GEMM, mlp_dim, micro_batch, mlp_dim,
                                 tiled=Dim.NONE, phase="bwd",
                                 collectives=(Collective(CollectiveKind.DP_ALL_REDUCE),)))
    for i in range(1, mlps):
        connect(graph, f"MLP_{i}", f"MLP_{i + 1}")
    for i in range(mlps, 1, -1):
        connect(graph, f"MLP_{i}_bwd", f"MLP_{i - 1}_bwd")
    for i in range(1, mlps):  # activations saved for the next MLP's weight update
        connect(graph, f"MLP_{i}", f"MLP_{i + 1}_weight_update")
    for i in range(mlps, 1, -1):  # gradients for the previous MLP's weight update
        connect(graph, f"MLP_{i}_bwd", f"MLP_{i - 1}_weight_update")
    return Workload(
        name=name, graph=graph, scheme=Scheme.DATA_PARALLEL, layers=1, global_batch=global_batch,
        micro_batch=1, tiled_extent=1, tile_size=1, copies=copies,
        resident_dram_bytes=float(tables * rows * emb_dim * word),
        pass_unit="training samples", units_per_pass=micro_batch,  # a pass: a micro-batch, forward and backward
    )

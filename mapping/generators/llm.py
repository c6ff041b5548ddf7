"""Transformer layer graphs: forward (18 kernels, 21 tensors) and forward+backward
(41 kernels, 53 tensors with six weight-update GEMMs), DFModel's LLM generators.

Dimensions follow DFModel: activations are [M = features, N = sequence]; the sequence
(N) is tiled; Q/K/V and attention GEMMs batch the heads in ``outer``.
"""

from __future__ import annotations

import networkx as nx

from mapping.generators.registry import GENERATORS
from mapping.graph import Collective, CollectiveKind, Dim, Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.workload import Scheme, Workload

EW, EW2, GW, GG = KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2, KernelKind.GEMM_WEIGHT, KernelKind.GEMM

# forward tensors (producer, consumer) in DFModel's order; operands count up per consumer
_FWD_EDGES = [
    ("Add_Prev_Layer", "LayerNorm_1"), ("LayerNorm_1", "Q"), ("LayerNorm_1", "K"), ("LayerNorm_1", "V"),
    ("Q", "MHA_GEMM_1"), ("K", "MHA_GEMM_1"), ("MHA_GEMM_1", "SOFTMAX"), ("SOFTMAX", "DropOut_1"),
    ("V", "MHA_GEMM_2"), ("DropOut_1", "MHA_GEMM_2"), ("MHA_GEMM_2", "PROJ_GEMM"),
    ("PROJ_GEMM", "DropOut_2"), ("DropOut_2", "Add_1"), ("Add_Prev_Layer", "Add_1"),
    ("Add_1", "LayerNorm_2"), ("LayerNorm_2", "FFN0"), ("FFN0", "GeLU"), ("GeLU", "FFN1"),
    ("FFN1", "DropOut_3"), ("DropOut_3", "Add_2"), ("Add_1", "Add_2"),
]

_BWD_EDGES = [
    ("Loss_bwd", "DropOut_3_bwd"), ("DropOut_3_bwd", "FFN1_bwd"), ("FFN1_bwd", "GeLU_bwd"),
    ("GeLU_bwd", "FFN0_bwd"), ("FFN0_bwd", "LayerNorm_2_bwd"), ("LayerNorm_2_bwd", "DropOut_2_bwd"),
    ("DropOut_2_bwd", "PROJ_GEMM_bwd"), ("PROJ_GEMM_bwd", "MHA_GEMM_2_bwd1"), ("V", "MHA_GEMM_2_bwd1"),
    ("PROJ_GEMM_bwd", "MHA_GEMM_2_bwd2"), ("DropOut_1", "MHA_GEMM_2_bwd2"),
    ("MHA_GEMM_2_bwd1", "DropOut_1_bwd"), ("MHA_GEMM_2_bwd2", "V_bwd"), ("DropOut_1_bwd", "SOFTMAX_bwd"),
    ("SOFTMAX_bwd", "MHA_GEMM_1_bwd1"), ("SOFTMAX_bwd", "MHA_GEMM_1_bwd2"), ("K", "MHA_GEMM_1_bwd1"),
    ("Q", "MHA_GEMM_1_bwd2"), ("MHA_GEMM_1_bwd1", "Q_bwd"), ("MHA_GEMM_1_bwd2", "K_bwd"),
    # weight updates: dW = dY (operand 1) x X (operand 2)
    ("DropOut_3_bwd", "FFN1_bwd_weight_update"), ("GeLU", "FFN1_bwd_weight_update"),
    ("GeLU_bwd", "FFN0_bwd_weight_update"), ("LayerNorm_2", "FFN0_bwd_weight_update"),
    ("DropOut_2_bwd", "PROJ_GEMM_bwd_weight_update"), ("MHA_GEMM_2", "PROJ_GEMM_bwd_weight_update"),
    ("MHA_GEMM_2_bwd2", "V_bwd_weight_update"), ("LayerNorm_1", "V_bwd_weight_update"),
    ("MHA_GEMM_1_bwd2", "K_bwd_weight_update"), ("LayerNorm_1", "K_bwd_weight_update"),
    ("MHA_GEMM_1_bwd1", "Q_bwd_weight_update"), ("LayerNorm_1", "Q_bwd_weight_update"),
]


def _forward_kernels(h: int, heads: int, s: int, ffn: int, suffix: str = "") -> list[Kernel]:
    d = h // heads
    spec = [
        ("Add_Prev_Layer", EW, 1, h, 1, s), ("LayerNorm_1", EW, 1, h, 1, s),
        ("Q", GW, heads, d, h, s), ("K", GW, heads, d, h, s), ("V", GW, heads, d, h, s),
        ("MHA_GEMM_1", GG, heads, s, d, s), ("SOFTMAX", EW, heads, s, 1, s), ("DropOut_1", EW, heads, s, 1, s),
        ("MHA_GEMM_2", GG, heads, d, s, s), ("PROJ_GEMM", GW, 1, h, h, s), ("DropOut_2", EW, 1, h, 1, s),
        ("Add_1", EW2, 1, h, 1, s), ("LayerNorm_2", EW, 1, h, 1, s), ("FFN0", GW, 1, ffn, h, s),
        ("GeLU", EW, 1, ffn, 1, s), ("FFN1", GW, 1, h, ffn, s), ("DropOut_3", EW, 1, h, 1, s),
        ("Add_2", EW2, 1, h, 1, s),
    ]
    return [Kernel(name + suffix, kind, m, k, n, outer) for name, kind, outer, m, k, n in spec]


def _backward_kernels(h: int, heads: int, s: int, ffn: int) -> list[Kernel]:
    d = h // heads
    spec = [
        ("Loss_bwd", EW, 1, h, 1, s), ("DropOut_3_bwd", EW, 1, h, 1, s), ("FFN1_bwd", GW, 1, ffn, h, s),
        ("GeLU_bwd", EW, 1, ffn, 1, s), ("FFN0_bwd", GW, 1, h, ffn, s), ("LayerNorm_2_bwd", EW, 1, h, 1, s),
        ("DropOut_2_bwd", EW, 1, h, 1, s), ("PROJ_GEMM_bwd", GW, 1, h, h, s),
        ("MHA_GEMM_2_bwd1", GG, heads, s, d, s), ("MHA_GEMM_2_bwd2", GG, heads, d, s, s),
        ("V_bwd", GW, 1, h, h, s), ("DropOut_1_bwd", EW, heads, s, 1, s), ("SOFTMAX_bwd", EW, heads, s, 1, s),
        ("MHA_GEMM_1_bwd1", GG, heads, d, s, s), ("MHA_GEMM_1_bwd2", GG, heads, d, s, s),
        ("Q_bwd", GW, heads, d, h, s), ("K_bwd", GW, heads, d, h, s),
    ]
    out = [Kernel(name, kind, m, k, n, outer, phase="bwd") for name, kind, outer, m, k, n in spec]
    # weight-update GEMMs: K = sequence (tiled), each with a periodic DP gradient all-reduce
    dp = (Collective(CollectiveKind.DP_ALL_REDUCE),)
    for name, m, n in [("FFN1", ffn, h), ("FFN0", h, ffn), ("PROJ_GEMM", h, h), ("V", h, h), ("K", h, h), ("Q", h, h)]:
        out.append(Kernel(f"{name}_bwd_weight_update", GG, m, s, n, tiled=Dim.K, phase="bwd", collectives=dp))
    return out


def llm_layer(hidden: int, heads: int, seq: int, word: int = 2, training: bool = False,
              ffn: int | None = None, name: str = "llm") -> nx.DiGraph:
    """One transformer layer: forward only, or forward + backward + weight updates."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    ffn = ffn or 4 * hidden
    graph = new_graph(name, word)
    for kernel in _forward_kernels(hidden, heads, seq, ffn):
        add_kernel(graph, kernel)
    edges = list(_FWD_EDGES)
    if training:
        for kernel in _backward_kernels(hidden, heads, seq, ffn):
            add_kernel(graph, kernel)
        edges += _BWD_EDGES
    for u, v in edges:
        connect(graph, u, v)
    return graph


def llm_layers(layers: int, hidden: int, heads: int, seq: int, word: int = 2,
               ffn: int | None = None, name: str = "llm") -> nx.DiGraph:
    """``layers`` forward layers chained: layer i's Add_2 feeds layer i+1's Add_Prev_Layer."""
    ffn = ffn or 4 * hidden
    graph = new_graph(name, word)
    for i in range(layers):
        suffix = f"_layer_{i}"
        for kernel in _forward_kernels(hidden, heads, seq, ffn, suffix):
            add_kernel(graph, kernel)
        if i:
            connect(graph, f"Add_2_layer_{i - 1}", f"Add_Prev_Layer{suffix}")
        for u, v in _FWD_EDGES:
            connect(graph, u + suffix, v + suffix)
    return graph


@GENERATORS.register("llm")
def llm_workload(hidden: int, heads: int, seq: int, layers: int, global_batch: int,
                 micro_batch: int | None = 1, word: int = 2, training: bool = False,
                 layers_in_graph: int = 1, tile_size: int | None = None, ffn: int | None = None,
                 name: str = "llm") -> Workload:
    """An LLM training or inference workload built from one (or a few chained) layers."""
    if layers_in_graph == 1:
        graph = llm_layer(hidden, heads, seq, word, training, ffn, name)
    elif training:
        raise ValueError("multi-layer graphs are forward only; use layers_in_graph = 1 for training")
    else:
        graph = llm_layers(layers_in_graph, hidden, heads, seq, word, ffn, name)
    return Workload(
        name=name, graph=graph, scheme=Scheme.TENSOR_PARALLEL, layers=layers,
        layers_in_graph=layers_in_graph, global_batch=global_batch, micro_batch=micro_batch,
        tiled_extent=seq, tile_size=tile_size,
        # DFModel: training pipelines pass 2*h*s*w bytes per layer between stages
        pipeline_bytes_per_layer=2.0 * hidden * seq * word if training else 0.0,
        pass_unit="training tokens" if training else "prompt tokens", units_per_pass=seq,  # a pass: one sequence
    )

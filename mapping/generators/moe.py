"""A Mixture-of-Experts transformer layer, forward (new: no published DFModel generator has it).

Attention as in the dense layer, then a router GEMM and top-k gate, an all-to-all
dispatch of token copies to E experts, the experts' FFNs batched in ``outer`` (so
splitting OUTER is expert parallelism), and an all-to-all combine. Each expert
receives ``ceil(seq * top_k * capacity_factor / E)`` token slots.
"""

from __future__ import annotations

import math

from mapping.generators.llm import _forward_kernels
from mapping.generators.registry import GENERATORS
from mapping.graph import Collective, CollectiveKind, Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.workload import Scheme, Workload

EW, EW2, GW = KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2, KernelKind.GEMM_WEIGHT

_ATTENTION_EDGES = [
    ("Add_Prev_Layer", "LayerNorm_1"), ("LayerNorm_1", "Q"), ("LayerNorm_1", "K"), ("LayerNorm_1", "V"),
    ("Q", "MHA_GEMM_1"), ("K", "MHA_GEMM_1"), ("MHA_GEMM_1", "SOFTMAX"), ("SOFTMAX", "DropOut_1"),
    ("V", "MHA_GEMM_2"), ("DropOut_1", "MHA_GEMM_2"), ("MHA_GEMM_2", "PROJ_GEMM"),
    ("PROJ_GEMM", "DropOut_2"), ("DropOut_2", "Add_1"), ("Add_Prev_Layer", "Add_1"), ("Add_1", "LayerNorm_2"),
]
_MOE_EDGES = [
    ("LayerNorm_2", "Router"), ("Router", "TopK_Gate"), ("LayerNorm_2", "Dispatch"), ("TopK_Gate", "Dispatch"),
    ("Dispatch", "Expert_FFN0"), ("Expert_FFN0", "Expert_GeLU"), ("Expert_GeLU", "Expert_FFN1"),
    ("Expert_FFN1", "Combine"), ("TopK_Gate", "Combine"), ("Combine", "Add_2"), ("Add_1", "Add_2"),
]


def expert_slots(seq: int, experts: int, top_k: int, capacity_factor: float) -> int:
    """Token slots per expert: the routed copies spread evenly, padded by the capacity factor."""
    return max(1, math.ceil(seq * top_k * capacity_factor / experts))


@GENERATORS.register("moe")
def moe_workload(hidden: int, heads: int, seq: int, experts: int, top_k: int, layers: int,
                 global_batch: int, capacity_factor: float = 1.0, expert_ffn: int | None = None,
                 micro_batch: int | None = 1, word: int = 2, tile_size: int | None = None,
                 name: str = "moe") -> Workload:
    """A forward MoE workload of ``layers`` identical layers."""
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k must be between 1 and the number of experts ({experts}), got {top_k}")
    ffn = expert_ffn or 4 * hidden
    slots = expert_slots(seq, experts, top_k, capacity_factor)
    a2a = (Collective(CollectiveKind.ALL_TO_ALL),)
    graph = new_graph(name, word)
    for kernel in _forward_kernels(hidden, heads, seq, ffn)[:13]:  # attention block through LayerNorm_2
        add_kernel(graph, kernel)
    for kernel in [
        Kernel("Router", GW, experts, hidden, seq), Kernel("TopK_Gate", EW, experts, 1, seq),
        Kernel("Dispatch", EW2, hidden, 1, slots, experts, collectives=a2a),
        Kernel("Expert_FFN0", GW, ffn, hidden, slots, experts, role=f"experts:{top_k}"),
        Kernel("Expert_GeLU", EW, ffn, 1, slots, experts, role=f"experts:{top_k}"),
        Kernel("Expert_FFN1", GW, hidden, ffn, slots, experts, role=f"experts:{top_k}"),
        Kernel("Combine", EW2, hidden, 1, seq, collectives=a2a), Kernel("Add_2", EW2, hidden, 1, seq),
    ]:
        add_kernel(graph, kernel)
    for u, v in _ATTENTION_EDGES + _MOE_EDGES:
        connect(graph, u, v)
    return Workload(name=name, graph=graph, scheme=Scheme.TENSOR_PARALLEL, layers=layers,
                    global_batch=global_batch, micro_batch=micro_batch, tiled_extent=seq, tile_size=tile_size,
                    pass_unit="prompt tokens", units_per_pass=seq)  # a pass: one sequence

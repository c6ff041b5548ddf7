"""One LLM decode step with a KV cache (new: no published DFModel generator has it).

Each of ``batch`` sequences adds one token to a context of ``context`` tokens. The
cached keys and values of every sequence are read from DRAM by the two attention
GEMMs (``extra_dram_bytes``) and the new key/value are written back; there is no
sequence dimension to tile, so the batch (N) is the tiled dimension.
"""

from __future__ import annotations

from mapping.generators.registry import GENERATORS
from mapping.graph import Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.workload import Scheme, Workload

EW, EW2, GW, GG = KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2, KernelKind.GEMM_WEIGHT, KernelKind.GEMM

_EDGES = [
    ("Add_Prev_Layer", "LayerNorm_1"), ("LayerNorm_1", "Q"), ("LayerNorm_1", "K"), ("LayerNorm_1", "V"),
    ("Q", "MHA_GEMM_1"), ("K", "MHA_GEMM_1"), ("MHA_GEMM_1", "SOFTMAX"), ("V", "MHA_GEMM_2"),
    ("SOFTMAX", "MHA_GEMM_2"), ("MHA_GEMM_2", "PROJ_GEMM"), ("PROJ_GEMM", "Add_1"),
    ("Add_Prev_Layer", "Add_1"), ("Add_1", "LayerNorm_2"), ("LayerNorm_2", "FFN0"), ("FFN0", "GeLU"),
    ("GeLU", "FFN1"), ("FFN1", "Add_2"), ("Add_1", "Add_2"),
]


@GENERATORS.register("decode")
def decode_workload(hidden: int, heads: int, context: int, batch: int, layers: int,
                    word: int = 2, ffn: int | None = None, steps: int = 1, tile_size: int | None = None,
                    name: str = "llm-decode") -> Workload:
    """``steps`` decode steps (graph passes) of ``batch`` sequences through ``layers`` layers."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    ffn = ffn or 4 * hidden
    d, b, ctx = hidden // heads, batch, context + 1
    cache_read = float(b) * context * hidden * word  # keys (or values) of every sequence
    new_entry = float(b) * hidden * word
    spec = [
        ("Add_Prev_Layer", EW, 1, hidden, 1, 0.0, ""), ("LayerNorm_1", EW, 1, hidden, 1, 0.0, ""),
        ("Q", GW, heads, d, hidden, 0.0, ""), ("K", GW, heads, d, hidden, new_entry, "append:k_cache"),
        ("V", GW, heads, d, hidden, new_entry, "append:v_cache"),
        ("MHA_GEMM_1", GG, heads, ctx, d, cache_read, "read:k_cache"), ("SOFTMAX", EW, heads, ctx, 1, 0.0, ""),
        ("MHA_GEMM_2", GG, heads, d, ctx, cache_read, "read:v_cache"),
        ("PROJ_GEMM", GW, 1, hidden, hidden, 0.0, ""),
        ("Add_1", EW2, 1, hidden, 1, 0.0, ""), ("LayerNorm_2", EW, 1, hidden, 1, 0.0, ""),
        ("FFN0", GW, 1, ffn, hidden, 0.0, ""), ("GeLU", EW, 1, ffn, 1, 0.0, ""), ("FFN1", GW, 1, hidden, ffn, 0.0, ""),
        ("Add_2", EW2, 1, hidden, 1, 0.0, ""),
    ]
    graph = new_graph(name, word)
    for kname, kind, outer, m, k, extra, role in spec:
        add_kernel(graph, Kernel(kname, kind, m, k, b, outer, extra_dram_bytes=extra, role=role))
    for u, v in _EDGES:
        connect(graph, u, v)
    return Workload(name=name, graph=graph, scheme=Scheme.TENSOR_PARALLEL, layers=layers,
                    global_batch=steps, micro_batch=1, tiled_extent=b, tile_size=tile_size,
                    resident_dram_bytes=2.0 * cache_read * layers,
                    pass_unit="generated tokens", units_per_pass=b)  # a pass: a step, a new token per sequence

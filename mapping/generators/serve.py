"""One decoder layer of a real model (mapping/models.py) as a serving step runs it.

A step processes ``tokens`` tokens together (the tiled dimension N): one per running sequence
in decode, a prompt's chunk in prefill, both in a mixed step. Its attention computes ``keys``
query-key pairs per head in all (a decode token attends to its whole context, a prefill token
of a chunk after ``k`` cached tokens to ``k`` plus the chunk's earlier tokens and itself:
causal, so a whole prompt of p tokens is p (p + 1) / 2 pairs: quadratic) and reads
``kv_read`` cached tokens' keys and values from the memory the caches live in (the chunk's
own keys and values are computed in the step and stay on chip). Kernels:

- ``Input`` (the residual stream), ``Norm_1`` (RMSNorm);
- ``Q`` (heads x head_dim), ``K`` and ``V`` (kv_heads x head_dim each: grouped-query
  attention), whose new entries are appended to the caches (``append:``);
- ``Attn_QK`` (scores, batched over the query heads: keys / tokens keys per token, reading
  the cached keys, ``read:k_cache``), ``Softmax``, ``Attn_V`` (reading the cached values);
- ``O`` (output projection), ``Add_1``, ``Norm_2``;
- a dense model's SwiGLU: ``Gate_Up`` (2 x ffn outputs), ``SiLU_Mul``, ``Down``; an MoE's
  ``Router``, ``TopK``, then the experts the step's tokens reach, as a batch over them
  (``Experts_Gate_Up``, ``Experts_SiLU``, ``Experts_Down``: the expected number of experts
  ``tokens`` tokens routed top_k uniformly reach, each with its share of the tokens), and
  ``Combine``; then ``Add_2``.

Weights are every projection's (and the reached experts'); the output head and the
embedding lookup are once a step, not a layer, and are not in the graph (a step's caller
adds them). Qwen3's per-head q/k norms are counted in the parameters, not as kernels (their
FLOPs are 0.01 % of the layer's). FLOPs follow DFModel (2 M K N outer for a GEMM, M N outer
for an elementwise kernel).
"""

from __future__ import annotations

import math

from mapping.generators.registry import GENERATORS
from mapping.graph import Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.models import ModelSpec, model_preset
from mapping.workload import Scheme, Workload

EW, EW2, GW, GG = KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2, KernelKind.GEMM_WEIGHT, KernelKind.GEMM

_ATTENTION_EDGES = [
    ("Input", "Norm_1"), ("Norm_1", "Q"), ("Norm_1", "K"), ("Norm_1", "V"), ("Q", "Attn_QK"), ("K", "Attn_QK"),
    ("Attn_QK", "Softmax"), ("Softmax", "Attn_V"), ("V", "Attn_V"), ("Attn_V", "O"), ("O", "Add_1"),
    ("Input", "Add_1"), ("Add_1", "Norm_2"),
]
_DENSE_EDGES = [("Norm_2", "Gate_Up"), ("Gate_Up", "SiLU_Mul"), ("SiLU_Mul", "Down"), ("Down", "Add_2"),
                ("Add_1", "Add_2")]
_MOE_EDGES = [("Norm_2", "Router"), ("Router", "TopK"), ("Norm_2", "Experts_Gate_Up"),
              ("Experts_Gate_Up", "Experts_SiLU"), ("Experts_SiLU", "Experts_Down"), ("Experts_Down", "Combine"),
              ("TopK", "Combine"), ("Combine", "Add_2"), ("Add_1", "Add_2")]

FIRST, LAST = "Input", "Add_2"  # the residual stream enters the layer and leaves it


def reached_experts(model: ModelSpec, tokens: int) -> int:
    """Experts a step's kernels compute: the expected number reached, rounded, at least top_k."""
    return min(model.experts, max(model.top_k, int(round(model.experts_hit(tokens)))))


def layer_kernels(model: ModelSpec, tokens: int, keys: int, kv_read: int) -> list[Kernel]:
    """The layer's kernels in execution order (module docstring)."""
    n, w, d = tokens, model.word, model.head_dim
    h, kvw = model.hidden, model.kv_width
    per_token = max(1, math.ceil(keys / n))  # keys a query attends to, on average
    cache = float(kv_read) * kvw * w  # cached keys (or values) read, bytes
    new = float(n) * kvw * w  # the step's new keys (or values), bytes
    out = [
        Kernel("Input", EW, h, 1, n), Kernel("Norm_1", EW, h, 1, n),
        Kernel("Q", GW, d, h, n, model.heads),
        Kernel("K", GW, d, h, n, model.kv_heads, extra_dram_bytes=new, role="append:k_cache"),
        Kernel("V", GW, d, h, n, model.kv_heads, extra_dram_bytes=new, role="append:v_cache"),
        Kernel("Attn_QK", GG, per_token, d, n, model.heads, extra_dram_bytes=cache, role="read:k_cache"),
        Kernel("Softmax", EW, per_token, 1, n, model.heads),
        Kernel("Attn_V", GG, d, per_token, n, model.heads, extra_dram_bytes=cache, role="read:v_cache"),
        Kernel("O", GW, h, model.q_width, n), Kernel("Add_1", EW2, h, 1, n), Kernel("Norm_2", EW, h, 1, n),
    ]
    if model.moe:
        reached = reached_experts(model, n)
        slots = max(1, math.ceil(n * model.top_k / reached))
        f = model.expert_ffn
        out += [Kernel("Router", GW, model.experts, h, n), Kernel("TopK", EW, model.experts, 1, n),
                Kernel("Experts_Gate_Up", GW, 2 * f, h, slots, reached),
                Kernel("Experts_SiLU", EW, f, 1, slots, reached),
                Kernel("Experts_Down", GW, h, f, slots, reached), Kernel("Combine", EW2, h, 1, n)]
    else:
        out += [Kernel("Gate_Up", GW, 2 * model.ffn, h, n), Kernel("SiLU_Mul", EW, model.ffn, 1, n),
                Kernel("Down", GW, h, model.ffn, n)]
    out.append(Kernel("Add_2", EW2, h, 1, n))
    return out


def step_workload(spec: ModelSpec, tokens: int, keys: int = 0, kv_read: int = 0, tile_size: int | None = None,
                  name: str = "serve-step", layers: int = 0) -> Workload:
    """A serving step of ``spec``: ``tokens`` tokens, ``keys`` query-key pairs per head,
    ``kv_read`` cached tokens read (module docstring); ``layers`` (0: the model's) is how many
    times the layer repeats."""
    if tokens < 1:
        raise ValueError(f"a step has at least one token, got tokens = {tokens}")
    if keys < 0 or kv_read < 0:
        raise ValueError(f"keys ({keys}) and kv_read ({kv_read}) must not be negative")
    graph = new_graph(name, spec.word)
    for kernel in layer_kernels(spec, tokens, max(keys, tokens), kv_read):
        add_kernel(graph, kernel)
    for u, v in _ATTENTION_EDGES + (_MOE_EDGES if spec.moe else _DENSE_EDGES):
        connect(graph, u, v)
    return Workload(name=name, graph=graph, scheme=Scheme.TENSOR_PARALLEL, layers=layers or spec.layers,
                    global_batch=1, micro_batch=1, tiled_extent=tokens, tile_size=tile_size,
                    pass_unit="step tokens", units_per_pass=tokens)


@GENERATORS.register("serve-step")
def serve_step_workload(model: str, tokens: int, keys: int = 0, kv_read: int = 0, tile_size: int | None = None,
                        word: int = 2, name: str = "serve-step", layers: int = 0) -> Workload:
    """``step_workload`` of a model named in mapping/models.py, its elements ``word`` bytes."""
    return step_workload(model_preset(model).with_(word=word), tokens, keys, kv_read, tile_size, name, layers)

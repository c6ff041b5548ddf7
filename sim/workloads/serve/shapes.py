"""A serving step's shape, its roofline, and the anchor shape that prices it.

A step (prefill, decode or mixed) is described by four counts (``StepShape``): the tokens it
processes (the weight GEMMs' N), the query-key pairs its attention computes per head, the
cached tokens whose keys and values it reads, and the tokens that produce logits (decode
tokens, and prompts whose last chunk it holds). They are what its bytes and FLOPs depend on:
``layer_bytes``/``layer_flops`` come from the very kernels the step's plan is mapped from
(mapping/generators/serve.py), so the roofline of a shape and the plan simulated for it
count the same things.

Roofline (``roofline_cycles``): max(bytes / the first memory tier's bandwidth, FLOPs / the
chip's peak) for the layers (all ``model.layers`` of them), plus the same for the output head
and embedding lookup, which run once a step after the layers.

An anchor (``anchor``) is the shape whose plan is simulated to price a step: its tokens rounded
to the nearest power of ``ratio``, and its pairs and cached tokens per token to the nearest
power of ``context_ratio`` (a step of 300 tokens with 1,900 pairs a token is priced from the
plan of 256 tokens with 2,048 pairs a token for ratios 2, or 256 and 1,024 for ratios 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mapping.generators.serve import layer_kernels
from mapping.models import ModelSpec


@dataclass(frozen=True, order=True)
class StepShape:
    """What a serving step processes (module docstring)."""

    tokens: int  # tokens through the weights (one per decode sequence, a prefill chunk's)
    keys: int  # query-key pairs per head, over all its tokens
    kv_read: int  # cached tokens whose K and V its attention reads (per layer)
    logits: int = 0  # tokens that produce logits through the output head

    @classmethod
    def of(cls, decode: list[int], chunks: list[tuple[int, int, bool]]) -> "StepShape":
        """The step of decode sequences with these contexts (tokens cached before the step) and
        prefill chunks (tokens, tokens cached before it, whether it ends its prompt). A decode
        token attends to its context and itself; a chunk of c tokens after k cached ones to
        c k + c (c + 1) / 2 pairs (causal)."""
        tokens = len(decode) + sum(c for c, _, _ in chunks)
        keys = sum(x + 1 for x in decode) + sum(c * k + c * (c + 1) // 2 for c, k, _ in chunks)
        kv = sum(decode) + sum(k for _, k, _ in chunks)
        return cls(tokens, keys, kv, len(decode) + sum(1 for _, _, last in chunks if last))

    def with_logits(self, logits: int) -> "StepShape":
        return StepShape(self.tokens, self.keys, self.kv_read, logits)


@dataclass(frozen=True)
class Roofline:
    """A step's bytes and FLOPs, and its roofline in cycles, split into the layers and the head."""

    layer_bytes: float  # all layers
    layer_flops: float
    head_bytes: float
    head_flops: float
    layers_cycles: float
    head_cycles: float

    @property
    def cycles(self) -> float:
        return self.layers_cycles + self.head_cycles

    @property
    def bytes(self) -> float:
        return self.layer_bytes + self.head_bytes

    @property
    def flops(self) -> float:
        return self.layer_flops + self.head_flops


def layer_cost(model: ModelSpec, shape: StepShape) -> tuple[float, float]:
    """(bytes, FLOPs) of one layer of the step: weights, cached K/V read, new K/V written."""
    ks = layer_kernels(model, shape.tokens, max(shape.keys, shape.tokens), shape.kv_read)
    w = model.word
    return (sum(k.weight_bytes(w) + k.extra_dram_bytes for k in ks), sum(k.flop for k in ks))


def head_cost(model: ModelSpec, shape: StepShape) -> tuple[float, float]:
    """(bytes, FLOPs) of the step's once-a-step work: the embedding rows its tokens look up, and
    the output head (vocab x hidden) over the tokens that produce logits (read whole when any does)."""
    w, h = model.word, model.hidden
    head = float(model.vocab * h * w) if shape.logits else 0.0
    return shape.tokens * h * w + head, 2.0 * shape.logits * model.vocab * h


def roofline(model: ModelSpec, shape: StepShape, bytes_per_cycle: float, flops_per_cycle: float,
             layers: int | None = None) -> Roofline:
    """The step's roofline on a chip moving ``bytes_per_cycle`` from its memory and computing
    ``flops_per_cycle`` (module docstring); ``layers``: the model's when None."""
    n = model.layers if layers is None else layers
    lb, lf = layer_cost(model, shape)
    hb, hf = head_cost(model, shape)
    lb, lf = n * lb, n * lf
    return Roofline(lb, lf, hb, hf, max(lb / bytes_per_cycle, lf / flops_per_cycle),
                    max(hb / bytes_per_cycle, hf / flops_per_cycle))


def _nearest_power(x: float, ratio: float) -> float:
    """``ratio`` ** round(log_ratio x) (x > 0)."""
    return ratio ** round(math.log(x, ratio))


def anchor(shape: StepShape, ratio: float, context_ratio: float | None = None) -> StepShape:
    """The shape whose simulated plan prices ``shape`` (module docstring): its tokens to the nearest
    power of ``ratio``, its pairs and cached tokens per token to the nearest power of
    ``context_ratio`` (``ratio`` when None); ratio 1: itself."""
    if ratio <= 1:
        return shape
    c = ratio if context_ratio is None else context_ratio
    n = max(1, int(round(_nearest_power(shape.tokens, ratio))))
    per_key = max(1.0, shape.keys / shape.tokens)
    keys = max(n, int(round(n * _nearest_power(per_key, c)))) if c > 1 else max(n, round(n * per_key))
    per_kv = shape.kv_read / shape.tokens
    kv = 0 if shape.kv_read == 0 else max(1, int(round(n * (_nearest_power(per_kv, c) if c > 1 else per_kv))))
    return StepShape(n, keys, kv, 0)

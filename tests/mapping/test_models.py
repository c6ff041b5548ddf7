"""Model presets against their published figures, and the serving step's graph against closed forms."""

from __future__ import annotations

import itertools

import pytest

from mapping.generators.serve import layer_kernels, reached_experts, step_workload
from mapping.graph import kernels
from mapping.looping import looped
from mapping.models import MODELS, model_preset
from mapping.plan import KernelPlan, MappingPlan, PartitionPlan, TensorPlan

# the model cards' parameter counts (total, and activated per token for the MoEs), to their precision
CARDS = {
    "llama-3.1-8b": (8.03e9, 8.03e9, 0.005e9),
    "llama-3.1-70b": (70.6e9, 70.6e9, 0.05e9),
    "llama-2-7b": (6.74e9, 6.74e9, 0.005e9),  # 6,738,415,616 counted from its config.json
    "llama-3.2-1b": (1.23e9, 1.23e9, 0.01e9),  # model card: "1B (1.23B)"; 1,235,814,400 from its config.json
    "mixtral-8x7b": (46.7e9, 12.9e9, 0.05e9),  # Mistral AI: "46.7B total parameters but only uses 12.9B per token"
    # Qwen3-30B-A3B card: "30.5B in total and 3.3B activated"; counting both embeddings the activated
    # figure is 3.353 B, which the card writes 3.3 (truncated), hence the wider tolerance
    "qwen3-30b-a3b": (30.5e9, 3.3e9, 0.06e9),
}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_parameter_counts_are_the_model_cards(name):
    total, active, tol = CARDS[name]
    m = MODELS[name]
    assert abs(m.params - total) <= tol
    assert abs(m.active_params - active) <= tol


def test_llama_8b_by_hand():
    """Llama-3.1-8B from its config by hand: 4096 x 4096 Q and O, 4096 x 1024 K and V, three
    4096 x 14336 MLP matrices and two norms a layer; 128256 x 4096 embedding and head."""
    m = model_preset("llama-3.1-8b")
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert m.layer_params == layer == 218_112_000
    assert m.params == 32 * layer + 2 * 128256 * 4096 + 4096 == 8_030_261_248
    assert m.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131_072  # 128 KiB a token


def test_llama_1b_by_hand():
    """Llama-3.2-1B from its config by hand: 2048 x 2048 Q and O, 2048 x 512 K and V (8 KV heads of
    64), three 2048 x 8192 MLP matrices and two norms a layer; one 128256 x 2048 matrix for the
    embedding and the head (tie_word_embeddings true)."""
    m = model_preset("llama-3.2-1b")
    layer = 2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048
    assert m.layer_params == layer == 60_821_504
    assert m.params == 16 * layer + 128256 * 2048 + 2048 == 1_235_814_400
    assert m.kv_bytes_per_token == 16 * 2 * 8 * 64 * 2 == 32_768  # a quarter of Llama-3.1-8B's
    assert m.with_(tied=False).params - m.params == 128256 * 2048


def test_unknown_model_names_the_known_ones():
    with pytest.raises(KeyError, match="llama-3.1-8b"):
        model_preset("llama-2")


def test_experts_reached_against_enumeration():
    """E (1 - (1 - k/E)^n) against every way n tokens can pick their top-k sets of E experts."""
    m = model_preset("mixtral-8x7b").with_(experts=4, top_k=2)
    subsets = list(itertools.combinations(range(4), 2))
    for n in (1, 2, 3):
        sizes = [len(set().union(*pick)) for pick in itertools.product(subsets, repeat=n)]
        assert m.experts_hit(n) == pytest.approx(sum(sizes) / len(sizes))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_layer_streams_the_layers_weights(name):
    """The graph's weight bytes are the layer's projections (and, when every expert is reached,
    all experts): the parameters minus the norms."""
    m = MODELS[name]
    n = 4096  # enough tokens to reach every expert
    ks = layer_kernels(m, n, n, 0)
    weights = sum(k.weight_bytes(m.word) for k in ks)
    norms = 2 * m.hidden + (2 * m.head_dim if m.qk_norm else 0)
    assert reached_experts(m, n) == m.experts
    assert weights == (m.layer_params - norms) * m.word


def test_decode_flops_and_kv_bytes_closed_form():
    """Llama-3.1-8B, 8 sequences of 1,000 cached tokens: 2 FLOPs a weight a token, attention
    2 x heads x head_dim per pair twice (scores and values), K and V of 1,000 tokens read a
    sequence and of 8 new tokens written."""
    m = model_preset("llama-3.1-8b")
    b, ctx = 8, 1000
    ks = {k.name: k for k in layer_kernels(m, b, b * (ctx + 1), b * ctx)}
    weight_elems = sum(k.weight_bytes(2) for k in ks.values()) / 2
    gemm = sum(k.flop for k in ks.values() if k.has_weight)
    assert gemm == 2 * b * weight_elems
    attention = ks["Attn_QK"].flop + ks["Attn_V"].flop
    assert attention == 2 * 2 * m.heads * m.head_dim * b * (ctx + 1)
    assert ks["Attn_QK"].extra_dram_bytes == ks["Attn_V"].extra_dram_bytes == b * ctx * m.kv_width * 2
    assert ks["K"].extra_dram_bytes + ks["V"].extra_dram_bytes == b * m.kv_bytes_per_token / m.layers


def test_the_step_graph_maps_and_loops():
    """The serve-step workload is a valid graph; a plan of it loops layers with the layer's
    output carried round, everything per pass multiplied."""
    w = step_workload(model_preset("qwen3-30b-a3b"), 16, 16 * 100, 16 * 99, tile_size=4)
    names = [k.name for k in kernels(w.graph)]
    assert names[0] == "Input" and names[-1] == "Add_2" and "Experts_Gate_Up" in names
    ks = tuple(KernelPlan(n, "gemm", "fwd", "none", 0, 10.0, 1e-6, 0.0, 100.0, True, "", m=8, k=8, n=4, tiles=4,
                          flop_per_tile=2.5, extra_dram_bytes=7.0) for n in ("Input", "Add_2"))
    plan = MappingPlan("w", "r 1", "sn40l", 1, "optimal", num_tiles=4, layers_per_stage=48, kernels=ks,
                       partitions=(PartitionPlan(0, ("Input", "Add_2"), 1e-6, 2e-6, 0.0, 2e-6, 0.0),),
                       tensors=(TensorPlan("Input", "Add_2", 1, 64.0, 2, True),))
    lp = looped(plan, 3, "Input", "Add_2")
    assert lp.num_tiles == 12 and lp.layers_per_stage == 1
    assert [k.weight_bytes for k in lp.kernels] == [300.0, 300.0] and lp.kernels[0].flop == 30.0
    assert lp.kernels[0].flop_per_tile == 2.5 and lp.kernels[0].extra_dram_bytes == 21.0
    carried = lp.tensors[-1]
    assert (carried.producer, carried.consumer, carried.lag, carried.depth) == ("Add_2", "Input", 4, 6)
    assert carried.tile_bytes == 8 * 4 * 2
    with pytest.raises(ValueError, match="one partition"):
        looped(type(plan)(**{**plan.__dict__, "partitions": plan.partitions * 2}), 2, "Input", "Add_2")

"""Graph model, generators and JSON: counts from the published generators, validation, round trip."""

import json

import networkx as nx
import pytest

from mapping.generators import dlrm_workload, fft_workload, hpl_workload, llm_layer, llm_layers, moe_workload
from mapping.generators.decode import decode_workload
from mapping.graph import (
    Dim,
    GraphError,
    Kernel,
    KernelKind,
    add_kernel,
    buffer_depths,
    connect,
    from_dict,
    kernels,
    load_graph,
    new_graph,
    save_graph,
    to_dict,
    validate_graph,
)


@pytest.mark.parametrize("training, n_kernels, n_tensors", [(False, 18, 21), (True, 41, 53)])
def test_llm_layer_has_published_shape(training, n_kernels, n_tensors):
    g = llm_layer(1024, 8, 128, training=training)
    assert (g.number_of_nodes(), g.number_of_edges()) == (n_kernels, n_tensors)


def test_llm_flop_by_hand():
    h, a, s = 64, 4, 16
    fwd = {k.name: k.flop for k in kernels(llm_layer(h, a, s))}
    assert fwd["Q"] == 2 * h * h * s  # outer*M = h, K = h
    assert fwd["MHA_GEMM_1"] == 2 * a * s * (h // a) * s
    assert fwd["FFN0"] == 2 * 4 * h * h * s
    assert fwd["SOFTMAX"] == a * s * s


def test_published_generator_sizes():
    dlrm = dlrm_workload(6750, 5, 15, 600, 15, 93, 14_211_469, 512, 128_000_000)
    assert (dlrm.graph.number_of_nodes(), dlrm.graph.number_of_edges()) == (60, 76)
    # the bottom MLP's lookup: 600 tables x 15 rows x 93 x 512 x 2 bytes
    assert kernels(dlrm.graph)[4].extra_dram_bytes == 857_088_000
    hpl = hpl_workload(1_048_576, 2048, 64)
    assert (hpl.graph.number_of_nodes(), hpl.graph.number_of_edges()) == (64, 63)
    assert kernels(hpl.graph)[-1].m == 1_048_576 - 63 * 2048
    fft = fft_workload(2**40, 32)
    assert [k.k for k in kernels(fft.graph)] == [512, 512]  # 4 * log32(2^20) * 32
    assert kernels(fft.graph)[1].collectives[0].bytes == 2**41


def test_multilayer_and_new_generators_validate():
    g = llm_layers(3, 64, 4, 16)
    assert g.number_of_nodes() == 54 and g.number_of_edges() == 3 * 21 + 2
    moe = moe_workload(64, 4, 32, experts=8, top_k=2, layers=2, global_batch=4, capacity_factor=1.25)
    expert = next(k for k in kernels(moe.graph) if k.name == "Expert_FFN0")
    assert expert.outer == 8 and expert.n == 10  # ceil(32 * 2 * 1.25 / 8)
    dec = decode_workload(64, 4, context=100, batch=8, layers=2)
    attn = next(k for k in kernels(dec.graph) if k.name == "MHA_GEMM_1")
    assert attn.m == 101 and attn.extra_dram_bytes == 8 * 100 * 64 * 2


def test_buffer_depth_is_level_difference_plus_one():
    g = new_graph("t", 2)
    for name in "abc":
        add_kernel(g, Kernel(name, KernelKind.ELEMENTWISE2 if name == "c" else KernelKind.ELEMENTWISE, 4, 1, 4))
    connect(g, "a", "b")
    connect(g, "b", "c")
    connect(g, "a", "c")  # skips a level: must hold two tiles
    depth = dict(zip(g.edges, buffer_depths(g)))
    assert depth == {("a", "b"): 2, ("b", "c"): 2, ("a", "c"): 3}


def test_validation_reports_every_problem():
    g = new_graph("bad", 2)
    add_kernel(g, Kernel("x", KernelKind.ELEMENTWISE, 4, 3, 4))  # elementwise with k != 1
    add_kernel(g, Kernel("y", KernelKind.ELEMENTWISE, 0, 1, 4))  # m = 0
    connect(g, "y", "x")  # backwards in execution order
    with pytest.raises(GraphError) as err:
        validate_graph(g)
    text = str(err.value)
    assert "k = 1" in text and "m must be" in text and "backwards" in text
    assert len(err.value.problems) >= 3


def test_cycle_and_too_many_inputs_rejected():
    g = nx.DiGraph(name="c", word=2)
    add_kernel(g, Kernel("a", KernelKind.ELEMENTWISE, 2, 1, 2))
    add_kernel(g, Kernel("b", KernelKind.ELEMENTWISE, 2, 1, 2))
    connect(g, "a", "b")
    connect(g, "b", "a")
    with pytest.raises(GraphError, match="cycle"):
        validate_graph(g)
    g2 = new_graph("d", 2)
    for n in "pqr":
        add_kernel(g2, Kernel(n, KernelKind.ELEMENTWISE, 2, 1, 2))
    connect(g2, "p", "r")
    connect(g2, "q", "r")
    with pytest.raises(GraphError, match="at most 1"):
        validate_graph(g2)


def test_json_round_trip(tmp_path):
    g = llm_layer(256, 4, 32, training=True)
    path = tmp_path / "g.json"
    save_graph(g, path)
    back = load_graph(path)
    assert kernels(back) == kernels(g)
    assert [(u, v, d["tensor"]) for u, v, d in back.edges(data=True)] == \
           [(u, v, d["tensor"]) for u, v, d in g.edges(data=True)]
    assert json.loads(path.read_text())["word"] == 2
    bad = to_dict(g)
    bad["tensors"].append({"from": "Q", "to": "nope"})
    with pytest.raises(GraphError, match="unknown kernel"):
        from_dict(bad)
    assert kernels(back)[-1].tiled is Dim.K

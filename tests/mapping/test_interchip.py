"""Inter-chip tensor splits: the Megatron identities and exhaustive search on small graphs."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mapping.generators import llm_layer
from mapping.graph import Dim, Kernel, KernelKind, add_kernel, connect, kernels, new_graph
from mapping.interchip import PRODUCED, SplitInfeasible, allowed_dims, choose_splits, edge_collective, required_layout


@given(heads=st.sampled_from([2, 4, 8]), head_dim=st.sampled_from([8, 16, 64]), seq=st.sampled_from([16, 128]),
       word=st.sampled_from([1, 2, 4]))
@settings(max_examples=12, deadline=None)
def test_llm_layer_collective_bytes(heads, head_dim, seq, word):
    h = heads * head_dim
    fwd = choose_splits(llm_layer(h, heads, seq, word))
    both = choose_splits(llm_layer(h, heads, seq, word, training=True))
    assert fwd.collective_bytes == 2 * h * seq * word  # two all-reduces (attention out, FFN out)
    assert both.collective_bytes == 4 * h * seq * word
    assert fwd.status == both.status == "optimal"


def test_megatron_split_pattern():
    g = llm_layer(256, 4, 32)
    dims = dict(zip(g.nodes, choose_splits(g).dims))
    assert dims["Q"] is dims["MHA_GEMM_1"] is Dim.OUTER  # heads split
    assert dims["FFN0"] is Dim.M and dims["FFN1"] is Dim.K  # column then row parallel
    assert dims["PROJ_GEMM"] is Dim.K


def _brute_force(graph):
    ks = kernels(graph)
    word = graph.graph["word"]
    edges = [(list(graph.nodes).index(u), list(graph.nodes).index(v), d["tensor"].operand)
             for u, v, d in graph.edges(data=True)]
    best = float("inf")
    for dims in itertools.product(*[allowed_dims(k) for k in ks]):
        cost = sum(k.output_bytes(word) for k, d in zip(ks, dims) if d is Dim.K)
        for u, v, op in edges:
            if edge_collective(PRODUCED[dims[u]], required_layout(ks[v], op, dims[v])) is not None:
                cost += ks[u].output_bytes(word)
        best = min(best, cost)
    return best


@given(st.data())
@settings(max_examples=25, deadline=None)
def test_milp_equals_exhaustive_search(data):
    n = data.draw(st.integers(3, 6))
    g = new_graph("rand", 2)
    kinds = [KernelKind.GEMM_WEIGHT, KernelKind.GEMM, KernelKind.ELEMENTWISE, KernelKind.ELEMENTWISE2]
    names = []
    for i in range(n):
        kind = data.draw(st.sampled_from(kinds))
        m, k, nn = (data.draw(st.sampled_from([1, 4, 16])) for _ in range(3))
        k = k if kind in (KernelKind.GEMM_WEIGHT, KernelKind.GEMM) else 1
        if kind is KernelKind.GEMM_WEIGHT and max(m, k) == 1:
            m = 4
        add_kernel(g, Kernel(f"k{i}", kind, m, k, max(nn, 2), tiled=Dim.N))
        names.append(f"k{i}")
    for j in range(1, n):
        arity = 2 if kernels(g)[j].kind in (KernelKind.GEMM, KernelKind.ELEMENTWISE2) else 1
        producers = data.draw(st.lists(st.integers(0, j - 1), unique=True, max_size=arity))
        for i in producers:
            connect(g, names[i], names[j])
    assert choose_splits(g).collective_bytes == pytest.approx(_brute_force(g))


def test_unshardable_weight_kernel_is_reported():
    g = new_graph("x", 2)
    add_kernel(g, Kernel("w", KernelKind.GEMM_WEIGHT, 1, 1, 64, tiled=Dim.N))  # only N > 1, and it is tiled
    with pytest.raises(SplitInfeasible, match="'w'"):
        choose_splits(g)

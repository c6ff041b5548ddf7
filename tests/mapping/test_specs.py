"""A spec's workload from the generator registry: kinds, keyword arguments, 'let the mapper choose'."""

import pytest

from mapping.generators import GENERATORS
from mapping.graph import kernel_of, new_graph, save_graph
from mapping.specs import WORKLOAD_KINDS, build_workload
from mapping.workload import Scheme, Workload

LLM = {"hidden": 512, "heads": 8, "seq": 128, "layers": 4, "global_batch": 16}


def test_the_kinds_are_the_registered_generators():
    assert WORKLOAD_KINDS == GENERATORS.names() == ("decode", "dlrm", "fft", "graph", "hpl", "llm", "moe", "serve-step")


def test_a_spec_table_is_its_generators_keyword_arguments():
    w = build_workload({"kind": "llm", "word": 4, "name": "small", "llm": {**LLM, "training": True}})
    assert (w.name, w.layers, w.global_batch, w.tiled_extent) == ("small", 4, 16, 128)
    assert w.graph.graph["word"] == 4 and w.graph.number_of_nodes() == 41  # a training layer's kernels
    assert w.pipeline_bytes_per_layer == 2 * 512 * 128 * 4  # DFModel: 2 h s w between stages when training
    fwd = build_workload({"kind": "llm", "llm": LLM})
    assert fwd.name == "llm" and fwd.graph.graph["word"] == 2 and fwd.graph.number_of_nodes() == 18


def test_zero_means_let_the_mapper_choose():
    w = build_workload({"kind": "llm", "llm": {**LLM, "micro_batch": 0, "tile_size": 0, "ffn": 0}})
    assert w.micro_batch is None and w.tile_size is None
    assert kernel_of(w.graph, "FFN0").m == 4 * 512  # ffn = 0: 4h
    assert kernel_of(build_workload({"kind": "llm", "llm": {**LLM, "ffn": 1000}}).graph, "FFN0").m == 1000


def test_a_graph_file_keeps_its_own_word(tmp_path):
    from mapping.generators import llm_layer

    path = tmp_path / "g.json"
    save_graph(llm_layer(256, 4, 64, word=1), path)
    w = build_workload({"kind": "graph", "word": 4, "graph": {"path": str(path), "scheme": "data_parallel",
                                                              "micro_batch": 0}})
    assert w.graph.graph["word"] == 1 and w.scheme is Scheme.DATA_PARALLEL and w.micro_batch is None


def test_unknown_kinds_and_keys_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown workload generator 'lm'.*did you mean 'llm'"):
        build_workload({"kind": "lm"})
    with pytest.raises(ValueError, match="workload.llm: .*'hiden'"):
        build_workload({"kind": "llm", "llm": {**LLM, "hiden": 3}})
    with pytest.raises(ValueError, match="workload.hpl: .*'block'"):
        build_workload({"kind": "hpl", "hpl": {"n": 1024, "iterations": 2}})


def test_a_generator_registered_elsewhere_is_built_with_no_other_edit():
    def chain(length: int, word: int = 2, name: str = "chain") -> Workload:
        from mapping.graph import Kernel, KernelKind, add_kernel, connect

        graph = new_graph(name, word)
        for i in range(length):
            add_kernel(graph, Kernel(f"k{i}", KernelKind.ELEMENTWISE, 64, 1, 64))
            if i:
                connect(graph, f"k{i - 1}", f"k{i}")
        return Workload(name=name, graph=graph)

    GENERATORS.register("chain")(chain)
    try:
        w = build_workload({"kind": "chain", "word": 8, "chain": {"length": 5}})
        assert w.name == "chain" and w.graph.number_of_nodes() == 5 and w.graph.graph["word"] == 8
    finally:
        GENERATORS.unregister("chain")

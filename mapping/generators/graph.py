"""A workload from a graph file (mapping.graph.save_graph) and how it is repeated and batched."""

from __future__ import annotations

from mapping.generators.registry import GENERATORS
from mapping.graph import load_graph
from mapping.workload import Scheme, Workload


@GENERATORS.register("graph")
def graph_workload(path: str, scheme: str = "tensor_parallel", layers: int = 1, global_batch: int = 1,
                   micro_batch: int | None = 1, tiled_extent: int = 1, tile_size: int | None = None, copies: int = 1,
                   word: int = 2, name: str = "graph") -> Workload:
    """The graph in ``path``; ``word`` is not used: the file gives its tensors' element size."""
    return Workload(name=name, graph=load_graph(path), scheme=Scheme(scheme), layers=layers,
                    global_batch=global_batch, micro_batch=micro_batch, tiled_extent=tiled_extent,
                    tile_size=tile_size, copies=copies)

"""A workload: a dataflow graph plus how it is repeated, batched and split across chips."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import networkx as nx

from mapping.graph import validate_graph


class Scheme(str, Enum):
    """How the chips of one copy share the work (DFModel treats each family its own way)."""

    TENSOR_PARALLEL = "tensor_parallel"  # TP/PP/DP; tensor splits from the inter-chip pass (LLMs)
    DATA_PARALLEL = "data_parallel"  # every chip runs the whole graph on its own batch (DLRM)
    FFT = "fft"  # the N dimension of every kernel split over all chips of a copy
    HPL = "hpl"  # 2-D block layout: M over dimension 0, K over dimension 1


@dataclass(frozen=True)
class Workload:
    """The graph and the repetition/batching facts the end-to-end time formula needs.

    ``batched`` workloads (LLM, DLRM) take ``sum_c T_c * pipeline_factor *
    layers_per_stage * global_batch / DP + p2p``; the others (HPL, FFT) just ``sum_c T_c``.
    """

    name: str
    graph: nx.DiGraph
    scheme: Scheme = Scheme.TENSOR_PARALLEL
    layers: int = 1  # layers of the model (the graph holds ``layers_in_graph`` of them)
    layers_in_graph: int = 1
    global_batch: int = 1
    micro_batch: int | None = 1  # None: enumerated
    tiled_extent: int = 1  # length of the tiled dimension (sequence length for LLMs)
    tile_size: int | None = None  # None: enumerated
    pipeline_bytes_per_layer: float = 0.0  # PP point-to-point bytes per layer (2*h*s*w when training)
    copies: int = 1
    batched: bool = True
    resident_dram_bytes: float = 0.0  # data spread over the chips of a copy (HPL matrix, tables)
    # what one graph pass processes, for per-token rates: ``units_per_pass`` of ``pass_unit``
    # (a decode step's generated tokens, a sequence's prompt tokens, a micro-batch's samples)
    pass_unit: str = "graph passes"
    units_per_pass: int = 1

    def __post_init__(self):
        validate_graph(self.graph)
        for key in ("layers", "layers_in_graph", "global_batch", "tiled_extent", "copies", "units_per_pass"):
            if getattr(self, key) < 1:
                raise ValueError(f"workload {self.name}: {key} must be >= 1")

    @property
    def graph_repeats(self) -> int:
        """How many times the graph runs per sample (layers / layers in the graph)."""
        return max(1, -(-self.layers // self.layers_in_graph))

    @property
    def pass_units(self) -> str:
        """``pass_unit``, saying so when a pass carries them through only some of the model's layers."""
        if self.layers_in_graph >= self.layers:
            return self.pass_unit
        return f"{self.pass_unit} (through {self.layers_in_graph} of {self.layers} layers)"

    @property
    def training(self) -> bool:
        return any(d["kernel"].phase == "bwd" for _, d in self.graph.nodes(data=True))

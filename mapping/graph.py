"""Dataflow graphs: kernels are nodes, tensors are edges of a networkx DiGraph.

Kernels are listed in execution order (insertion order must be topological), which is
also the kernel-by-kernel schedule. A tensor has one producer and one consumer; a
producer feeding several consumers is modelled as one replicated tensor per consumer
(DFModel's convention), so every edge carries the producer's full output.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

import networkx as nx


class KernelKind(str, Enum):
    """What a kernel computes (FLOP and operand layout rules follow from it)."""

    GEMM_WEIGHT = "gemm_weight"  # out[M,N] = W[M,K] @ in[K,N]; W stays resident on chip
    GEMM = "gemm"  # out[M,N] = in1[M,K] @ in2[K,N], two activations
    ELEMENTWISE = "elementwise"  # SIMD on one input, K = 1
    ELEMENTWISE2 = "elementwise2"  # SIMD on two inputs, K = 1


class Dim(str, Enum):
    """A kernel dimension: what a kernel is split or tiled along."""

    OUTER = "outer"
    M = "m"
    K = "k"
    N = "n"
    NONE = "none"


class CollectiveKind(str, Enum):
    """Collectives a kernel can carry; see mapping.collectives for how each is timed."""

    ALL_REDUCE = "all_reduce"  # TP group, over the kernel's output slice
    ALL_GATHER = "all_gather"  # TP group, over the kernel's output slice
    ALL_TO_ALL = "all_to_all"  # TP group, over the kernel's output slice
    DP_ALL_REDUCE = "dp_all_reduce"  # gradient all-reduce over DP, once per batch
    GLOBAL_ALL_TO_ALL = "global_all_to_all"  # all chips of a copy; explicit total bytes
    BROADCAST = "broadcast"  # HPL panel broadcast along dimension 1; explicit bytes
    POINT_TO_POINT = "point_to_point"  # HPL panel exchange along dimension 0; explicit bytes


EXPLICIT_SIZE = {CollectiveKind.GLOBAL_ALL_TO_ALL, CollectiveKind.BROADCAST, CollectiveKind.POINT_TO_POINT}


@dataclass(frozen=True)
class Collective:
    """A collective a kernel needs; ``bytes`` is used only by the explicit-size kinds."""

    kind: CollectiveKind
    bytes: float = 0.0


@dataclass(frozen=True)
class Kernel:
    """One vertex of the graph: a GEMM or SIMD kernel with its dimensions and needs."""

    name: str
    kind: KernelKind
    m: int
    k: int
    n: int
    outer: int = 1
    tiled: Dim = Dim.N
    phase: str = "fwd"  # "fwd" or "bwd" (training graphs keep them in separate partitions)
    collectives: tuple[Collective, ...] = ()
    extra_dram_bytes: float = 0.0  # DRAM traffic outside the graph's tensors (embeddings, KV cache)
    # what its extra traffic or work is, for a simulator that models it (DFModel does not look):
    # "append:NAME" / "read:NAME" a cache that grows a token per pass (its extra bytes are the
    # growth / the cache), "experts:K" the outer dimension is experts, each token routed to K
    role: str = ""

    @property
    def is_gemm(self) -> bool:
        return self.kind in (KernelKind.GEMM_WEIGHT, KernelKind.GEMM)

    @property
    def has_weight(self) -> bool:
        return self.kind is KernelKind.GEMM_WEIGHT

    @property
    def arity(self) -> int:
        """Number of activation inputs the kernel takes from other kernels (at most)."""
        return 2 if self.kind in (KernelKind.GEMM, KernelKind.ELEMENTWISE2) else 1

    @property
    def flop(self) -> float:
        # DFModel: 2*M*K*N*outer for GEMMs, M*N*outer for SIMD kernels
        if self.is_gemm:
            return 2.0 * self.outer * self.m * self.k * self.n
        return float(self.outer * self.m * self.n)

    def output_bytes(self, word: int) -> float:
        return float(self.outer * self.m * self.n * word)

    def weight_bytes(self, word: int) -> float:
        return float(self.outer * self.m * self.k * word) if self.has_weight else 0.0

    def size(self, dim: Dim) -> int:
        return {Dim.OUTER: self.outer, Dim.M: self.m, Dim.K: self.k, Dim.N: self.n}.get(dim, 1)


@dataclass(frozen=True)
class Tensor:
    """One edge: the producer's full output (``bytes``) delivered as operand 1 or 2."""

    bytes: float
    operand: int = 1


class GraphError(ValueError):
    """A dataflow graph that breaks the rules; ``problems`` lists every one found."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def new_graph(name: str, word: int) -> nx.DiGraph:
    """An empty dataflow graph whose tensors use ``word`` bytes per element."""
    return nx.DiGraph(name=name, word=int(word))


def add_kernel(graph: nx.DiGraph, kernel: Kernel) -> Kernel:
    if kernel.name in graph:
        raise GraphError([f"kernel {kernel.name!r} is defined twice"])
    graph.add_node(kernel.name, kernel=kernel)
    return kernel


def connect(graph: nx.DiGraph, producer: str, consumer: str, operand: int | None = None) -> Tensor:
    """Add the tensor producer -> consumer carrying the producer's full output."""
    if operand is None:
        operand = 1 + sum(1 for _ in graph.in_edges(consumer))
    tensor = Tensor(kernel_of(graph, producer).output_bytes(graph.graph["word"]), operand)
    graph.add_edge(producer, consumer, tensor=tensor)
    return tensor


def kernel_of(graph: nx.DiGraph, name: str) -> Kernel:
    return graph.nodes[name]["kernel"]


def kernels(graph: nx.DiGraph) -> list[Kernel]:
    """Kernels in execution (insertion) order."""
    return [data["kernel"] for _, data in graph.nodes(data=True)]


def tensors(graph: nx.DiGraph) -> list[tuple[str, str, Tensor]]:
    return [(u, v, data["tensor"]) for u, v, data in graph.edges(data=True)]


def edge_index(graph: nx.DiGraph) -> tuple[list[str], list[tuple[int, int]]]:
    """Kernel names and edges as (producer index, consumer index) pairs, in graph order."""
    names = list(graph.nodes)
    position = {name: i for i, name in enumerate(names)}
    return names, [(position[u], position[v]) for u, v in graph.edges]


def topological_levels(graph: nx.DiGraph) -> dict[str, int]:
    """Level of each kernel: 0 for sources, else 1 + the deepest producer's level."""
    level: dict[str, int] = {}
    for name in nx.topological_sort(graph):
        level[name] = max((level[p] + 1 for p in graph.predecessors(name)), default=0)
    return level


def buffer_depths(graph: nx.DiGraph) -> list[int]:
    """On-chip buffer depth of each tensor (graph edge order): level difference + 1.

    A tensor that skips levels must hold that many tiles while the pipeline fills
    (DFModel's buffer depth).
    """
    level = topological_levels(graph)
    return [level[v] - level[u] + 1 for u, v in graph.edges]


def validate_graph(graph: nx.DiGraph) -> None:
    """Raise GraphError listing every broken rule (cycles, sizes, operands, order)."""
    problems: list[str] = []
    word = graph.graph.get("word")
    if not isinstance(word, int) or word <= 0:
        problems.append(f"graph word size must be a positive whole number of bytes, got {word!r}")
    if not nx.is_directed_acyclic_graph(graph):
        problems.append(f"graph has a cycle: {' -> '.join(u for u, _ in nx.find_cycle(graph))}")
    order = {name: i for i, name in enumerate(graph.nodes)}
    for name, data in graph.nodes(data=True):
        kernel = data.get("kernel")
        if not isinstance(kernel, Kernel):
            problems.append(f"node {name!r} has no kernel attribute")
            continue
        problems += _kernel_problems(kernel)
        inputs = [graph.edges[u, name]["tensor"].operand for u in graph.predecessors(name)]
        if len(inputs) > kernel.arity:
            problems.append(f"kernel {name!r} ({kernel.kind.value}) has {len(inputs)} inputs, at most {kernel.arity}")
        if len(set(inputs)) != len(inputs) or any(op not in (1, 2) for op in inputs):
            problems.append(f"kernel {name!r} has inputs with operands {sorted(inputs)}; each must be 1 or 2, once")
    for u, v, data in graph.edges(data=True):
        tensor = data.get("tensor")
        if not isinstance(tensor, Tensor) or not tensor.bytes > 0:
            problems.append(f"tensor {u} -> {v} must have a positive size")
        if order[u] > order[v]:
            problems.append(f"tensor {u} -> {v} goes backwards: kernels must be listed in execution order")
    if problems:
        raise GraphError(problems)


def _kernel_problems(kernel: Kernel) -> list[str]:
    out = []
    for dim in ("m", "k", "n", "outer"):
        value = getattr(kernel, dim)
        if not isinstance(value, int) or value < 1:
            out.append(f"kernel {kernel.name!r}: {dim} must be a positive whole number, got {value!r}")
    if not kernel.is_gemm and kernel.k != 1:
        out.append(f"kernel {kernel.name!r}: elementwise kernels have k = 1, got {kernel.k}")
    if kernel.phase not in ("fwd", "bwd"):
        out.append(f"kernel {kernel.name!r}: phase must be 'fwd' or 'bwd', got {kernel.phase!r}")
    if kernel.extra_dram_bytes < 0:
        out.append(f"kernel {kernel.name!r}: extra DRAM bytes must be >= 0")
    if kernel.role and kernel.role.split(":")[0] not in ("append", "read", "experts"):
        out.append(f"kernel {kernel.name!r}: role {kernel.role!r} is not experts:K, append:NAME or read:NAME")
    for c in kernel.collectives:
        if c.kind in EXPLICIT_SIZE and not c.bytes > 0:
            out.append(f"kernel {kernel.name!r}: {c.kind.value} needs a positive size in bytes")
    return out


# ---------------------------------------------------------------- JSON
def to_dict(graph: nx.DiGraph) -> dict:
    return {
        "name": graph.graph.get("name", ""),
        "word": graph.graph["word"],
        "kernels": [_kernel_dict(k) for k in kernels(graph)],
        "tensors": [{"from": u, "to": v, "operand": t.operand} for u, v, t in tensors(graph)],
    }


def from_dict(data: dict) -> nx.DiGraph:
    """Rebuild (and validate) a graph from ``to_dict`` output; tensor sizes are recomputed."""
    graph = new_graph(data.get("name", ""), data["word"])
    for kd in data["kernels"]:
        add_kernel(graph, _kernel_from(kd))
    for td in data["tensors"]:
        missing = [n for n in (td["from"], td["to"]) if n not in graph]
        if missing:
            raise GraphError([f"tensor {td['from']} -> {td['to']} names unknown kernel(s) {missing}"])
        connect(graph, td["from"], td["to"], td.get("operand"))
    validate_graph(graph)
    return graph


def save_graph(graph: nx.DiGraph, path: str | Path) -> None:
    Path(path).write_text(json.dumps(to_dict(graph), indent=1) + "\n")


def load_graph(path: str | Path) -> nx.DiGraph:
    return from_dict(json.loads(Path(path).read_text()))


def _kernel_dict(kernel: Kernel) -> dict:
    d = asdict(kernel)
    d["kind"] = kernel.kind.value
    d["tiled"] = kernel.tiled.value
    d["collectives"] = [{"kind": c.kind.value, "bytes": c.bytes} for c in kernel.collectives]
    return d


def _kernel_from(d: dict) -> Kernel:
    d = dict(d)
    d["kind"] = KernelKind(d["kind"])
    d["tiled"] = Dim(d.get("tiled", "n"))
    d["collectives"] = tuple(Collective(CollectiveKind(c["kind"]), float(c.get("bytes", 0)))
                             for c in d.get("collectives", []))
    return Kernel(**d)


__all__ = [
    "Collective", "CollectiveKind", "Dim", "GraphError", "Kernel", "KernelKind", "Tensor",
    "add_kernel", "buffer_depths", "connect", "edge_index", "from_dict", "kernel_of", "kernels",
    "load_graph", "new_graph", "save_graph", "tensors", "to_dict", "topological_levels", "validate_graph",
]

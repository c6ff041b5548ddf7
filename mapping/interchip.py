"""Inter-chip pass: pick each kernel's split dimension to minimise collective bytes.

Each kernel splits one of OUTER, M, K, N or NONE over the TP group; each tensor is
produced in a layout (RR replicated, RS split on its 2nd dim, SR on its 1st) and
required in one by its consumer. A mismatch costs the tensor's full size (RS/SR -> RR
is an all-gather, RS <-> SR an all-to-all; RR -> anything is free) and splitting K
costs an all-reduce of the output. DFModel states this with products of layout
indicators; here the product is linearised: with one produced layout active,
``cost_e >= produced_l - required_l`` for l in {RS, SR} is exact at the optimum.
A second solve breaks ties towards splitting compute (fewest kernels left unsplit).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from mapping.graph import CollectiveKind, Dim, Kernel, KernelKind, edge_index, kernels
from mapping.milp import LinearModel

RR, RS, SR = "RR", "RS", "SR"
DIMS = (Dim.OUTER, Dim.M, Dim.K, Dim.N, Dim.NONE)

# produced layout of a kernel's output, by its split dimension
PRODUCED = {Dim.OUTER: SR, Dim.M: SR, Dim.K: RR, Dim.N: RS, Dim.NONE: RR}
# required layout of an input, by the consumer's role and split dimension (DFModel's rules)
_REQUIRED = {
    "weight_update": {Dim.OUTER: SR, Dim.M: SR, Dim.K: RS, Dim.N: SR, Dim.NONE: RR},  # K-tiled GEMMs
    "simd": {Dim.OUTER: SR, Dim.M: SR, Dim.K: RR, Dim.N: RS, Dim.NONE: RR},
    "input": {Dim.OUTER: SR, Dim.M: RR, Dim.K: SR, Dim.N: RS, Dim.NONE: RR},  # weight GEMM or operand 1
    "operand2": {Dim.OUTER: SR, Dim.M: SR, Dim.K: RS, Dim.N: RR, Dim.NONE: RR},
}


def required_layout(kernel: Kernel, operand: int, dim: Dim) -> str:
    """Layout the consumer needs for the input ``operand`` when it splits ``dim``."""
    if kernel.is_gemm and kernel.tiled is Dim.K:
        role = "weight_update"
    elif not kernel.is_gemm:
        role = "simd"
    elif kernel.kind is KernelKind.GEMM and operand == 2:
        role = "operand2"
    else:
        role = "input"
    return _REQUIRED[role][dim]


def edge_collective(produced: str, required: str) -> CollectiveKind | None:
    """The collective that turns a produced layout into the required one (None: free)."""
    if produced == RR or produced == required:
        return None
    return CollectiveKind.ALL_GATHER if required == RR else CollectiveKind.ALL_TO_ALL


def allowed_dims(kernel: Kernel) -> list[Dim]:
    """Dimensions a kernel may split: not size 1, not the tiled one; weights must be split;
    batched GEMMs (outer > 1) split the batch."""
    if kernel.outer > 1:
        return [] if kernel.tiled is Dim.OUTER else [Dim.OUTER]
    out = [d for d in (Dim.M, Dim.K, Dim.N) if kernel.size(d) > 1 and d is not kernel.tiled]
    if not kernel.has_weight:
        out.append(Dim.NONE)
    return out


@dataclass(frozen=True)
class SplitPlan:
    """The inter-chip answer: one dimension per kernel and the collectives it implies."""

    dims: tuple[Dim, ...]
    kernel_collective: tuple[CollectiveKind | None, ...]  # all-reduce when K is split
    edge_collective: tuple[CollectiveKind | None, ...]  # per tensor, in graph edge order
    collective_bytes: float
    status: str
    bound: float
    seconds: float


class SplitInfeasible(ValueError):
    """No split satisfies the rules (e.g. a weight kernel with nothing left to split)."""


def no_splits(graph: nx.DiGraph) -> SplitPlan:
    """Every kernel keeps its full size (schemes other than tensor parallelism)."""
    n, m = graph.number_of_nodes(), graph.number_of_edges()
    return SplitPlan((Dim.NONE,) * n, (None,) * n, (None,) * m, 0.0, "optimal", 0.0, 0.0)


def choose_splits(graph: nx.DiGraph, time_limit: float = 30.0) -> SplitPlan:
    """Solve the split MILP (and the tie-break) for a tensor-parallel graph."""
    ks = kernels(graph)
    _, edges = edge_index(graph)
    word = graph.graph["word"]
    allowed = [allowed_dims(k) for k in ks]
    for k, dims in zip(ks, allowed):
        if not dims:
            raise SplitInfeasible(f"kernel {k.name!r} has no dimension it may split (weights must be split, "
                                     f"and its tiled dimension {k.tiled.value} cannot be)")
    model = LinearModel()
    var = {}  # (kernel, dim) -> column
    for i, dims in enumerate(allowed):
        cols = model.add_binaries(len(dims))
        var.update({(i, d): c for d, c in zip(dims, cols)})
        model.add_row(cols, 1.0, 1.0, 1.0, name=f"one dimension for {ks[i].name}")
        if Dim.K in dims:
            model.set_cost(var[i, Dim.K], ks[i].output_bytes(word))  # all-reduce of the output
    operands = [t["tensor"].operand for _, _, t in graph.edges(data=True)]
    mismatch = model.add_vars(len(edges), 0.0, 1.0)
    for e, ((u, v), operand) in enumerate(zip(edges, operands)):
        model.set_cost(mismatch[e], ks[u].output_bytes(word))
        for layout in (RS, SR):
            prod = [var[u, d] for d in allowed[u] if PRODUCED[d] == layout]
            req = [var[v, d] for d in allowed[v] if required_layout(ks[v], operand, d) == layout]
            if prod:  # cost_e - produced_l + required_l >= 0
                model.add_row([mismatch[e], *prod, *req], [1.0] + [-1.0] * len(prod) + [1.0] * len(req), 0.0)
    first = model.solve(time_limit)
    if not first.has_solution:
        raise SplitInfeasible(f"split MILP: {first.status} {first.message}")
    # tie-break: among byte-optimal splits, leave the least work unsplit
    cost = np.array(model._cost)  # noqa: SLF001 - same module family, read once
    nz = np.flatnonzero(cost)
    model.add_row(nz, cost[nz], -np.inf, first.objective * (1 + 1e-9) + 0.5, name="optimal bytes")
    for c in range(model.num_vars):
        model.set_cost(c, 0.0)
    for i, dims in enumerate(allowed):
        if Dim.NONE in dims:
            model.set_cost(var[i, Dim.NONE], 1.0 + ks[i].flop / max(1.0, max(k.flop for k in ks)))
    second = model.solve(time_limit)
    x = second.x if second.has_solution else first.x
    assert x is not None  # the first solve succeeded
    chosen = tuple(next(d for d in allowed[i] if x[var[i, d]] > 0.5) for i in range(len(ks)))
    edge_coll = tuple(
        edge_collective(PRODUCED[chosen[u]], required_layout(ks[v], op, chosen[v]))
        for (u, v), op in zip(edges, operands)
    )
    kernel_coll = tuple(CollectiveKind.ALL_REDUCE if d is Dim.K else None for d in chosen)
    total = sum(ks[i].output_bytes(word) for i, d in enumerate(chosen) if d is Dim.K)
    total += sum(ks[u].output_bytes(word) for (u, _), c in zip(edges, edge_coll) if c is not None)
    return SplitPlan(chosen, kernel_coll, edge_coll, float(total), first.status, first.bound,
                    first.seconds + second.seconds)

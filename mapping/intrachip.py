"""Intra-chip pass: the partition MILP (kernels to ordered partitions), solved with HiGHS.

Variables: A[k,c] (kernel k runs in partition c); B[e,c] = A[u,c] AND A[v,c] (tensor
e stays on chip in c; three rows make the product exact); a tensor that crosses
partitions touches c by D[e,c] = A[u,c] + A[v,c] - 2 B[e,c] (DFModel's DRAM spill,
written in the producer's partition, read in the consumer's). S[k,c]: a weight kernel
alone in c slices its weight (DFModel's tiling factor). E[e,c] >= U + V - 1 - B: the
tensor is live in DRAM in every partition from its producer's to its consumer's.
Per-partition time T_c is an epigraph variable: T_c >= compute, memory, network
(perfect overlap) or T_c >= their sum. The objective is sum_c T_c; times are scaled by
a lower bound so the numbers HiGHS sees are of order one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mapping.milp import INF, LinearModel
from mapping.partition import PartitionProblem, time_lower_bound


@dataclass(frozen=True)
class PartitionResult:
    assignment: np.ndarray | None
    objective: float  # seconds, sum of partition times (inf when none)
    bound: float  # seconds, the solver's proof
    status: str
    seconds: float
    violated: tuple[str, ...] = ()  # elastic mode: the capacities that had to give


class _Builder:
    """Adds the partition model's variables and rows to a LinearModel."""

    def __init__(self, p: PartitionProblem, elastic: bool):
        self.p, self.elastic = p, elastic
        self.lp = LinearModel()
        self.scale = 1.0 / max(time_lower_bound(p), 1e-12)
        self.slacks: list[tuple[int, str]] = []
        self.C = p.partitions
        self.A: dict[tuple[int, int], int] = {}
        for k in range(p.n):
            allowed = list(p.allowed(k))
            cols = self.lp.add_binaries(len(allowed))
            self.A.update({(k, c): col for c, col in zip(allowed, cols)})
            self.lp.add_row(cols, 1.0, 1.0, 1.0, f"{p.names[k]} runs in one partition")
        self.B: dict[tuple[int, int], int] = {}
        self.S: dict[tuple[int, int], int] = {}

    def a(self, k: int, c: int) -> list[tuple[int, float]]:
        col = self.A.get((k, c))
        return [] if col is None else [(col, 1.0)]

    def row(self, terms: list[tuple[int, float]], lo: float = -INF, hi: float = INF, name: str = "") -> None:
        if terms:
            cols, coefs = zip(*terms)
            self.lp.add_row(list(cols), list(coefs), lo, hi, name)

    def precedence(self) -> None:
        for u, v in self.p.edges:
            terms = [(col, float(c)) for (k, c), col in self.A.items() if k == u]
            terms += [(col, -float(c)) for (k, c), col in self.A.items() if k == v]
            self.row(terms, hi=0.0, name=f"{self.p.names[u]} before {self.p.names[v]}")

    def on_chip(self) -> None:
        for e, (u, v) in enumerate(self.p.edges):
            for c in range(self.C):
                if (u, c) in self.A and (v, c) in self.A:
                    b = int(self.lp.add_vars(1, 0.0, 1.0)[0])
                    self.B[e, c] = b
                    au, av = self.A[u, c], self.A[v, c]
                    self.row([(b, 1.0), (au, -1.0)], hi=0.0)
                    self.row([(b, 1.0), (av, -1.0)], hi=0.0)
                    self.row([(b, 1.0), (au, -1.0), (av, -1.0)], lo=-1.0)

    def streaming(self) -> None:
        p = self.p
        if not p.stream_weights or p.weights_off_chip:
            return
        for k in np.flatnonzero(p.weight_sram > 0):
            for c in p.allowed(int(k)):
                others = [(col, 1.0) for (j, cc), col in self.A.items() if cc == c and j != k]
                if not others:
                    continue
                s = int(self.lp.add_binaries(1)[0])
                self.S[int(k), c] = s
                self.row([(s, 1.0), (self.A[int(k), c], -1.0)], hi=0.0)
                self.row(others + [(s, float(len(others)))], hi=float(len(others)), name="streamed kernel is alone")

    def spill_terms(self, e: int, c: int, weight: float) -> list[tuple[int, float]]:
        """weight * D[e,c] as terms."""
        u, v = self.p.edges[e]
        terms = [(col, weight) for col, _ in self.a(u, c) + self.a(v, c)]
        if (e, c) in self.B:
            terms.append((self.B[e, c], -2.0 * weight))
        return terms

    def capacity(self, terms: list[tuple[int, float]], cap: float, name: str) -> None:
        if self.elastic:
            slack = int(self.lp.add_vars(1, 0.0, INF, cost=1.0)[0])
            self.slacks.append((slack, name))
            terms = terms + [(slack, -1.0)]
        self.row(terms, hi=cap, name=name)

    def sram(self) -> None:
        p = self.p
        for c in range(self.C):
            terms: list[tuple[int, float]] = []
            for e, (u, _) in enumerate(p.edges):
                if (e, c) in self.B:
                    terms.append((self.B[e, c], p.onchip_sram[e] / p.sram_capacity))
                terms += self.spill_terms(e, c, p.spill_sram[e] / p.sram_capacity)
                if (u, c) in self.S:
                    terms.append((self.S[u, c], -p.spill_sram[e] / p.sram_capacity))
            for k in np.flatnonzero((p.weight_sram > 0) & (not p.weights_off_chip)):
                w = p.weight_sram[k] / p.sram_capacity
                terms += [(col, w) for col, _ in self.a(int(k), c)]
                if (int(k), c) in self.S:
                    terms.append((self.S[int(k), c], -w))
            self.capacity(terms, 1.0, f"SRAM capacity of partition {c}")

    def dram(self) -> None:
        p = self.p
        room = p.dram_capacity - p.dram_fixed
        if p.dram_fixed + p.edge_dram.sum() <= p.dram_capacity:
            return  # can never bind
        for c in range(self.C):
            terms = []
            for e, (u, v) in enumerate(p.edges):
                live = int(self.lp.add_vars(1, 0.0, 1.0)[0])
                up_to = [(col, 1.0) for (k, cc), col in self.A.items() if k == u and cc <= c]
                from_ = [(col, 1.0) for (k, cc), col in self.A.items() if k == v and cc >= c]
                both = [(self.B[e, c], 1.0)] if (e, c) in self.B else []
                self.row([(live, 1.0)] + [(col, -1.0) for col, _ in up_to + from_] + both, lo=-1.0)
                terms.append((live, p.edge_dram[e] / p.dram_capacity))
            self.capacity(terms, room / p.dram_capacity, f"DRAM capacity while partition {c} runs")

    def times(self) -> list[int]:
        p, s = self.p, self.scale
        T = list(self.lp.add_vars(self.C, cost=0.0 if self.elastic else 1.0))
        for c in range(self.C):
            members = [k for k in range(p.n) if (k, c) in self.A]
            compute = self.compute_terms(c, members)
            memory = [(self.A[k, c], p.kernel_memory[k] * s) for k in members if p.kernel_memory[k]]
            for e in range(len(p.edges)):
                memory += self.spill_terms(e, c, p.spill[e] * s)
            channels = [[(self.A[k, c], p.network[k, h] * s) for k in members if p.network[k, h]]
                        for h in range(p.network.shape[1])]
            network = channels[0] if len(channels) == 1 else self.epigraph(channels)
            parts = [compute, memory, network]
            if p.overlap:
                for part in parts:
                    self.row([(T[c], 1.0)] + [(col, -x) for col, x in part], lo=0.0)
            else:
                self.row([(T[c], 1.0)] + [(col, -x) for part in parts for col, x in part], lo=0.0)
            if p.core_options is None:
                self.row([(self.A[k, c], 1.0) for k in members], hi=float(p.cores), name=f"cores of partition {c}")
        return [int(t) for t in T]

    def epigraph(self, channels: list[list[tuple[int, float]]]) -> list[tuple[int, float]]:
        top = int(self.lp.add_vars(1)[0])
        for ch in channels:
            self.row([(top, 1.0)] + [(col, -x) for col, x in ch], lo=0.0)
        return [(top, 1.0)]

    def compute_terms(self, c: int, members: list[int]) -> list[tuple[int, float]]:
        p, s = self.p, self.scale
        if p.core_options is None:
            return [(self.A[k, c], p.compute[k] * s) for k in members]
        top = int(self.lp.add_vars(1)[0])
        budget = []
        for k in members:
            cores, secs = p.core_options[k]
            y = self.lp.add_binaries(len(cores))
            self.row([(int(j), 1.0) for j in y] + [(self.A[k, c], -1.0)], 0.0, 0.0)
            budget += [(int(j), float(n)) for j, n in zip(y, cores)]
            self.row([(top, 1.0)] + [(int(j), -t * s) for j, t in zip(y, secs)], lo=0.0)
        self.row(budget, hi=float(p.cores), name=f"cores of partition {c}")
        return [(top, 1.0)]

    def symmetry(self) -> None:
        """Empty partitions go last within each block (relabelling keeps every cost)."""
        p = self.p
        last_fwd, first_bwd = p.phase_window()
        blocks = [range(0, self.C)] if not p.split_phases else (
            [range(0, last_fwd + 1), range(first_bwd, self.C)] if last_fwd < first_bwd else [])
        for block in blocks:
            for c in list(block)[:-1]:
                here = [(col, -float(p.n)) for (k, cc), col in self.A.items() if cc == c]
                nxt = [(col, 1.0) for (k, cc), col in self.A.items() if cc == c + 1]
                self.row(nxt + here, hi=0.0)


def solve_partitions(problem: PartitionProblem, time_limit: float = 60.0, gap: float = 1e-3,
                     cutoff: float | None = None, elastic: bool = False) -> PartitionResult:
    """Optimal (or time-limited) assignment; ``cutoff`` (seconds) is a known incumbent's value.

    With ``elastic`` the capacities get priced slack and the answer names the ones that
    must be exceeded: the explanation of an infeasible problem.
    """
    b = _Builder(problem, elastic)
    b.precedence()
    b.on_chip()
    b.streaming()
    b.sram()
    b.dram()
    T = b.times()
    if not elastic:
        b.symmetry()
        if cutoff is not None and np.isfinite(cutoff):
            b.row([(t, 1.0) for t in T], hi=cutoff * b.scale * (1 + 1e-6) + 1e-9, name="incumbent cutoff")
    res = b.lp.solve(time_limit, gap)
    if elastic:
        x = res.x if res.x is not None else np.zeros(0)
        violated = tuple(name for col, name in b.slacks if res.has_solution and x[col] > 1e-7)
        return PartitionResult(None, INF, INF, res.status, res.seconds, violated)
    if not res.has_solution:
        bound = res.bound / b.scale if np.isfinite(res.bound) else res.bound
        return PartitionResult(None, INF, bound, res.status, res.seconds)
    assert res.x is not None  # has_solution
    assignment = np.zeros(problem.n, dtype=np.int64)
    for (k, c), col in b.A.items():
        if res.x[col] > 0.5:
            assignment[k] = c
    return PartitionResult(assignment, res.objective / b.scale, min(res.bound, res.objective) / b.scale,
                           res.status, res.seconds)

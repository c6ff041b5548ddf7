"""Exact planner: the lowest peak the canonical search can reach and prove within a time budget.

It starts from the best heuristic packing, first meets the capacity (when one is
given), then asks the decision procedure for ever lower peaks: the lower bound first
(often tight), then bisection between what is proved impossible and what is found.
A peak is proved optimal when it equals the lower bound or when the search has
exhausted every canonical packing one granule (gcd of sizes and alignments) below it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from allocators.canonical import Instance, decide
from allocators.errors import InputError
from allocators.lifetimes import Problem
from allocators.sweep import Sweep


@dataclass
class ExactResult:
    offsets: list[int] | None
    peak: int | None
    proved_lower_bound: int
    nodes: int
    seconds_to_fit: float | None  # when a packing under the capacity was first held


def granule(problem: Problem) -> int:
    """Every canonical offset and top is a multiple of this (gcd of sizes, alignments, bank size)."""
    values = [b.size for b in problem.buffers] + [b.alignment for b in problem.buffers]
    if problem.bank_size and any(b.banks is not None for b in problem.buffers):
        values.append(problem.bank_size)
    return math.gcd(*values) if values else 1


def solve_exact(problem: Problem, sw: Sweep, capacity: int | None, deadline: float, t0: float,
                incumbent: list[int] | None, lower_bound: int, progress=None) -> ExactResult:
    """Best packing found before ``deadline`` and the best lower bound proved on the peak."""
    say = progress or (lambda message: None)
    height = _stack_height(problem, None) + (capacity or 0)
    if height * (len(problem.buffers) + 1) >= 1 << 62:  # search keys are offset x (n + 1) + rank in int64
        raise InputError(f"sizes too large for the exact search ({height} B over {len(problem.buffers)} buffers "
                         f"would overflow its 64-bit keys); use method greedy or layergroup")
    inst = Instance.build(problem, sw)
    g = granule(problem)
    sizes = inst.size
    best = list(incumbent) if incumbent is not None else None
    best_peak = _peak(best, sizes)
    proved = -(-lower_bound // g) * g
    nodes = 0
    fit_at = time.perf_counter() - t0 if best is not None and _fits(best_peak, capacity) else None

    def attempt(target: int, until: float) -> str:
        nonlocal best, best_peak, nodes, fit_at
        out = decide(inst, target, min(until, deadline))
        nodes += out.nodes
        elapsed = time.perf_counter() - t0
        if out.status == "found":
            assert out.offsets is not None  # a found packing always carries its offsets
            peak = int((out.offsets + sizes).max())
            if best_peak is None or peak < best_peak:
                best, best_peak = out.offsets.tolist(), peak
            if fit_at is None and _fits(best_peak, capacity):
                fit_at = elapsed
            say(f"exact: packing with peak {peak} (target {target}) after {elapsed:.1f} s")
        elif out.status == "infeasible":
            say(f"exact: proved no packing with peak <= {target} after {elapsed:.1f} s")
        else:
            say(f"exact: no answer for peak <= {target} within its time slice ({elapsed:.1f} s)")
        return out.status

    say(f"exact: lower bound {lower_bound}, heuristic peak {best_peak}")

    # 1. meet the capacity (or, without one, find any packing if the heuristics found none)
    if best_peak is None or not _fits(best_peak, capacity):
        target = capacity if capacity is not None else _stack_height(problem, inst)
        if attempt(target, deadline) == "infeasible":
            proved = max(proved, target + g)
    # 2. lower the peak: the lower bound first, then bisection; an unknown answer raises the floor we try
    tried_floor = proved
    first = True
    while best_peak is not None and best_peak > proved and time.perf_counter() < deadline:
        lo, hi = max(proved, tried_floor), best_peak - g
        left = deadline - time.perf_counter()
        if lo > hi:  # every target below the best was tried without an answer: try to prove the best
            if attempt(hi, deadline) == "infeasible":
                proved = best_peak
            break
        target = lo if first else lo + (hi - lo) // (2 * g) * g
        first = False
        status = attempt(target, time.perf_counter() + left / 3)
        if status == "infeasible":
            proved = target + g
        elif status == "unknown":
            tried_floor = target + g
    return ExactResult(best, best_peak, min(proved, best_peak) if best_peak is not None else proved,
                       nodes, fit_at)


def _stack_height(problem: Problem, inst: Instance | None) -> int:
    """A height every buffer fits under when stacked one on another (with alignment padding),
    raised by the highest bank window start: a target that only bank constraints can make fail."""
    padded = sum(b.size + b.alignment - 1 for b in problem.buffers)
    if inst is None:
        return padded + (problem.bank_size or 0) * max((max(b.banks) + 1 for b in problem.buffers if b.banks),
                                                       default=0)
    return padded + max((s.windows[-1][0] for s in inst.lifts.values()), default=0)


def _peak(offsets: list[int] | None, sizes: np.ndarray) -> int | None:
    if offsets is None:
        return None
    return int((np.asarray(offsets, dtype=np.int64) + sizes).max(initial=0))


def _fits(peak: int | None, capacity: int | None) -> bool:
    return peak is not None and (capacity is None or peak <= capacity)

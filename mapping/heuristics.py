"""Fast feasible partitionings for any graph size: the MILP's incumbent and its fallback.

1. Contiguous segmentation by dynamic programming: kernels are listed in topological
   order, so cutting the list into at most C runs always respects dependencies; the
   best cut (ignoring only DRAM liveness, checked afterwards) is found exactly in
   O(n * L * C) segment evaluations, L the longest segment that can fit in SRAM.
2. Local search: move single kernels to other partitions while the total time drops
   and the assignment stays feasible.
"""

from __future__ import annotations

import numpy as np

from mapping.partition import Evaluation, PartitionProblem, evaluate


def _segment(p: PartitionProblem, start: int, stop: int) -> tuple[float, bool]:
    """Time of kernels [start, stop) sharing one partition, and whether they fit in it.

    Kernels before the segment sit in an earlier partition and the rest in a later one,
    so exactly the tensors crossing the cut spill; the time does not depend on which
    partition index the segment gets.
    """
    a = np.full(p.n, 2)
    a[:start] = 0
    a[start:stop] = 1
    ev = evaluate(p, a)
    fits = ev.sram[1] <= p.sram_capacity * (1 + 1e-9) and (p.core_options is not None or stop - start <= p.cores)
    return float(ev.time[1]), bool(fits)


def contiguous(problem: PartitionProblem) -> np.ndarray | None:
    """Best cut of the kernel list into at most C contiguous partitions (None if none fits)."""
    p = problem
    if p.kernel_by_kernel:
        return np.arange(p.n)
    n, C = p.n, p.partitions
    best = np.full((C + 1, n + 1), np.inf)  # best[c, j]: kernels [0, j) placed in partitions < c
    choice = np.full((C + 1, n + 1), -1, dtype=np.int64)  # segment start, or -1: partition c-1 empty
    best[0, 0] = 0.0
    cache: dict[tuple[int, int], tuple[float, bool]] = {}
    for c in range(C):
        best[c + 1] = best[c]
        for i in np.flatnonzero(np.isfinite(best[c])).tolist():
            for j in range(i + 1, n + 1):
                if c not in p.allowed(j - 1):
                    break
                if (i, j) not in cache:
                    cache[i, j] = _segment(p, i, j)
                t, fits = cache[i, j]
                if not fits:
                    if p.weight_sram[i:j].sum() > p.sram_capacity and not (p.stream_weights or p.weights_off_chip):
                        break  # weights only grow with a longer segment
                    continue
                if best[c, i] + t < best[c + 1, j]:
                    best[c + 1, j], choice[c + 1, j] = best[c, i] + t, i
    if not np.isfinite(best[C, n]):
        return None
    a = np.zeros(n, dtype=np.int64)
    j = n
    for c in range(C, 0, -1):
        i = choice[c, j]
        if i >= 0:
            a[i:j] = c - 1
            j = i
    return a


def local_search(problem: PartitionProblem, assignment: np.ndarray, max_rounds: int = 50) -> Evaluation:
    """Single-kernel moves (to any allowed partition) while they lower the feasible total."""
    p = problem
    current = evaluate(p, assignment)
    if p.kernel_by_kernel:
        return current
    preds = [p.edges[p.edges[:, 1] == k, 0] for k in range(p.n)]
    succs = [p.edges[p.edges[:, 0] == k, 1] for k in range(p.n)]
    for _ in range(max_rounds):
        improved = False
        for k in range(p.n):
            a = current.assignment
            lo = max((a[j] for j in preds[k]), default=0)
            hi = min((a[j] for j in succs[k]), default=p.partitions - 1)
            for c in p.allowed(k):
                if c == a[k] or not lo <= c <= hi:
                    continue
                trial = a.copy()
                trial[k] = c
                ev = evaluate(p, trial)
                if ev.feasible and ev.total < current.total * (1 - 1e-12):
                    current, improved = ev, True
                    a = current.assignment
        if not improved:
            break
    return current


def heuristic(problem: PartitionProblem) -> Evaluation | None:
    """A feasible assignment (contiguous DP, then local search), or None if none was found."""
    start = contiguous(problem)
    if start is None:
        return None
    ev = evaluate(problem, start)
    if not ev.feasible:
        return None
    return local_search(problem, start) if problem.n <= 200 else ev

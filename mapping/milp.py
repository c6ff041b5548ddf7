"""A small sparse model builder over scipy.optimize.milp (HiGHS).

Variables and rows are added incrementally; ``solve`` assembles a CSR matrix once.
Every answer carries the solver's dual bound, so callers can always state a gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

INF = np.inf


@dataclass(frozen=True)
class MilpResult:
    """status: optimal | feasible (time limit, incumbent found) | infeasible | no_solution | error."""

    status: str
    x: np.ndarray | None
    objective: float
    bound: float
    seconds: float
    message: str = ""

    @property
    def has_solution(self) -> bool:
        return self.x is not None


class LinearModel:
    def __init__(self) -> None:
        self._lb: list[float] = []
        self._ub: list[float] = []
        self._int: list[int] = []
        self._cost: list[float] = []
        self._rows: list[tuple[np.ndarray, np.ndarray, float, float]] = []
        self.row_names: list[str] = []

    @property
    def num_vars(self) -> int:
        return len(self._lb)

    def add_vars(self, count: int, lb: float = 0.0, ub: float = INF, integer: bool = False,
                 cost: float = 0.0) -> np.ndarray:
        start = len(self._lb)
        self._lb += [lb] * count
        self._ub += [ub] * count
        self._int += [1 if integer else 0] * count
        self._cost += [cost] * count
        return np.arange(start, start + count)

    def add_binaries(self, count: int) -> np.ndarray:
        return self.add_vars(count, 0.0, 1.0, integer=True)

    def set_cost(self, index: int, value: float) -> None:
        self._cost[index] = value

    def fix(self, index: int, value: float) -> None:
        self._lb[index] = self._ub[index] = value

    def add_row(self, cols, coefs, lo: float = -INF, hi: float = INF, name: str = "") -> None:
        cols = np.asarray(cols, dtype=np.int64)
        coefs = np.broadcast_to(np.asarray(coefs, dtype=float), cols.shape)
        unique, inverse = np.unique(cols, return_inverse=True)  # HiGHS rejects repeated columns
        self._rows.append((unique, np.bincount(inverse, weights=coefs, minlength=len(unique)), lo, hi))
        self.row_names.append(name)

    def solve(self, time_limit: float | None = None, gap: float = 1e-4) -> MilpResult:
        # scipy.optimize here, not at the top: every run's config imports this module, few solve (0.3 s)
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import csr_array

        started = time.perf_counter()
        n = self.num_vars
        options = {"mip_rel_gap": gap, "presolve": True}
        if time_limit is not None:
            options["time_limit"] = max(0.05, float(time_limit))
        constraints = []
        if self._rows:
            indptr = np.cumsum([0] + [len(c) for c, *_ in self._rows])
            cols = np.concatenate([c for c, *_ in self._rows])
            vals = np.concatenate([v for _, v, *_ in self._rows])
            matrix = csr_array((vals, cols, indptr), shape=(len(self._rows), n))
            lo = np.array([r[2] for r in self._rows])
            hi = np.array([r[3] for r in self._rows])
            constraints.append(LinearConstraint(matrix, lo, hi))
        res = milp(np.array(self._cost), constraints=constraints, integrality=np.array(self._int),
                   bounds=Bounds(np.array(self._lb), np.array(self._ub)), options=options)
        seconds = time.perf_counter() - started
        bound = getattr(res, "mip_dual_bound", None)
        bound = float(bound) if bound is not None and np.isfinite(bound) else -INF
        if res.status == 0:
            obj = float(res.fun)
            return MilpResult("optimal", np.asarray(res.x), obj, max(bound, -INF) if bound > -INF else obj, seconds)
        if res.status == 2 and "nfeasible" in res.message:
            return MilpResult("infeasible", None, INF, INF, seconds, res.message)
        if res.x is not None:  # time or node limit with an incumbent
            return MilpResult("feasible", np.asarray(res.x), float(res.fun), bound, seconds, res.message)
        if res.status == 1:
            return MilpResult("no_solution", None, INF, bound, seconds, res.message)
        return MilpResult("error", None, INF, -INF, seconds, res.message)

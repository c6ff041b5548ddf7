"""What an exploration found: the feasible non-dominated trials, and their hypervolume against a stated reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cluster.explore.pareto import as_losses, hypervolume, non_dominated, reference_point
from cluster.explore.spec import Objective
from cluster.explore.trials import StoredRun, final_runs

PARETO_TABLE = b"explore_pareto"  # the table name pareto.parquet carries (not a run table of the report)


@dataclass(frozen=True)
class Front:
    objectives: tuple[Objective, ...]
    trials: int  # candidates the optimisers proposed
    runs: int  # stored runs (every rung)
    feasible: int  # trials with a feasible full-fidelity run
    reference: dict[str, float] | None  # in each metric's own direction; None without a feasible trial
    hypervolume: float
    pareto: list[StoredRun]  # the feasible non-dominated full runs, one per distinct parameter set

    def to_json(self) -> dict:
        return {
            "trials": self.trials, "runs": self.runs, "feasible": self.feasible,
            "objectives": [o.to_json() for o in self.objectives],
            "reference": self.reference, "hypervolume": self.hypervolume,
            "pareto": [{"trial": r.trial, **r.params, **{o.metric: v for o, v in zip(self.objectives, r.values)}}
                       for r in self.pareto],
        }


def maximize_mask(objectives: tuple[Objective, ...]) -> list[bool]:
    return [o.maximize for o in objectives]


def feasible_final(runs: list[StoredRun]) -> list[StoredRun]:
    """Full-fidelity runs that were feasible and have every objective."""
    return [r for r in final_runs(runs) if r.feasible and all(np.isfinite(r.values))]


def reference_losses(objectives: tuple[Objective, ...], given: dict[str, float] | None,
                     losses: np.ndarray) -> np.ndarray | None:
    """The reference as losses: the spec's, else the worst feasible value plus 10 % of the range."""
    if given is not None:
        return as_losses(np.array([[given[o.metric] for o in objectives]]), maximize_mask(objectives))[0]
    return reference_point(losses) if len(losses) else None


def find_front(objectives: tuple[Objective, ...], runs: list[StoredRun],
               given: dict[str, float] | None = None) -> Front:
    good = feasible_final(runs)
    maximize = maximize_mask(objectives)
    losses = as_losses(np.array([r.values for r in good], dtype=float), maximize) if good \
        else np.empty((0, len(objectives)))
    ref = reference_losses(objectives, given, losses)
    pareto: list[StoredRun] = []
    seen: set[str] = set()
    for r, keep in zip(good, non_dominated(losses) if len(losses) else []):
        key = repr(sorted(r.params.items()))
        if keep and key not in seen:  # a repeated candidate (same params) is listed once
            seen.add(key)
            pareto.append(r)
    hv = hypervolume(losses, ref) if ref is not None else 0.0
    reference = None if ref is None else \
        {o.metric: float(-v if o.maximize else v) for o, v in zip(objectives, ref)}
    return Front(objectives, len({r.trial for r in runs}), len(runs), len(good), reference, hv, pareto)


def pareto_table(front: Front, stored: pa.Table) -> pa.Table:
    """The stored rows of the front's runs (every column), named explore_pareto."""
    index = {(t, r): i for i, (t, r) in enumerate(zip(stored["trial"].to_pylist(), stored["rung"].to_pylist()))}
    rows = stored.take(pa.array([index[(r.trial, r.rung)] for r in front.pareto], type=pa.int64()))
    meta = dict(rows.schema.metadata or {})
    meta[b"table"] = PARETO_TABLE
    return rows.replace_schema_metadata(meta)

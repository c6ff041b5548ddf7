"""What an exploration found: the feasible non-dominated trials, and their hypervolume against a stated reference.

The hypervolume is given raw (in the product of the objectives' units) and normalised: divided by
the volume of the box between the best feasible value of each objective (the ideal point) and the
reference, so 1 means one design is best in every objective and the front dominates the whole box.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cluster.explore.pareto import as_losses, hypervolume, non_dominated
from cluster.explore.reference import Reference, reference
from cluster.explore.spec import Objective
from cluster.explore.trials import StoredRun, final_runs

PARETO_TABLE = b"explore_pareto"  # the table name pareto.parquet carries (not a run table of the report)


@dataclass(frozen=True)
class Front:
    objectives: tuple[Objective, ...]
    trials: int  # candidates the optimisers proposed
    runs: int  # stored runs (every rung)
    feasible: int  # trials with a feasible full-fidelity run
    reference: dict[str, float] | None  # in each metric's own direction; None without a feasible trial or base run
    hypervolume: float
    pareto: list[StoredRun]  # the feasible non-dominated full runs, one per distinct parameter set
    normalized: float = 0.0  # the hypervolume over the box between the ideal point and the reference
    reference_from: dict[str, str] | None = None  # per objective: explore.reference, base run, worst feasible + 10 %

    def to_json(self) -> dict:
        return {
            "trials": self.trials, "runs": self.runs, "feasible": self.feasible,
            "objectives": [o.to_json() for o in self.objectives],
            "reference": self.reference, "reference_from": self.reference_from, "hypervolume": self.hypervolume,
            "hypervolume_normalized": self.normalized,
            "pareto": [{"trial": r.trial, **r.params, **{o.metric: v for o, v in zip(self.objectives, r.values)}}
                       for r in self.pareto],
        }


def maximize_mask(objectives: tuple[Objective, ...]) -> list[bool]:
    return [o.maximize for o in objectives]


def feasible_final(runs: list[StoredRun]) -> list[StoredRun]:
    """Full-fidelity runs that were feasible and have every objective."""
    return [r for r in final_runs(runs) if r.feasible and all(np.isfinite(r.values))]


def normalized(losses: np.ndarray, ref: np.ndarray, volume: float) -> float:
    """``volume`` over the box between the best of each column of ``losses`` and ``ref`` (0 if it is empty)."""
    if not len(losses):
        return 0.0
    box = float(np.prod(np.maximum(ref - losses.min(axis=0), 0.0)))
    return volume / box if box > 0 else 0.0


def find_front(objectives: tuple[Objective, ...], runs: list[StoredRun],
               given: dict[str, float] | None = None, base: dict | None = None) -> Front:
    """The front of ``runs``; its reference is ``given`` (the spec's), else from ``base`` (the base config's
    result row), else the worst feasible value plus 10 % (cluster/explore/reference.py)."""
    good = feasible_final(runs)
    maximize = maximize_mask(objectives)
    losses = as_losses(np.array([r.values for r in good], dtype=float), maximize) if good \
        else np.empty((0, len(objectives)))
    chosen: Reference | None = reference(objectives, given, base, losses)
    ref = chosen.losses(objectives) if chosen is not None else None
    pareto: list[StoredRun] = []
    seen: set[str] = set()
    for r, keep in zip(good, non_dominated(losses) if len(losses) else []):
        key = repr(sorted(r.params.items()))
        if keep and key not in seen:  # a repeated candidate (same params) is listed once
            seen.add(key)
            pareto.append(r)
    hv = hypervolume(losses, ref) if ref is not None else 0.0
    share = normalized(losses, ref, hv) if ref is not None else 0.0
    return Front(objectives, len({r.trial for r in runs}), len(runs), len(good),
                 chosen.values if chosen is not None else None, hv, pareto, share,
                 chosen.sources if chosen is not None else None)


def pareto_table(front: Front, stored: pa.Table) -> pa.Table:
    """The stored rows of the front's runs (every column), named explore_pareto."""
    index = {(t, r): i for i, (t, r) in enumerate(zip(stored["trial"].to_pylist(), stored["rung"].to_pylist()))}
    rows = stored.take(pa.array([index[(r.trial, r.rung)] for r in front.pareto], type=pa.int64()))
    meta = dict(rows.schema.metadata or {})
    meta[b"table"] = PARETO_TABLE
    return rows.replace_schema_metadata(meta)

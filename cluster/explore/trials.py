"""Trials as sweep points: the same point runner and store, one row per trial run in DIR/trials/.

A trial (a candidate the optimiser proposed) runs once per rung it reaches: without
multi-fidelity once, in full. Each run is a sweep point whose id is the trial's key
``t<trial>r<rung>`` (a repeated config is another trial, so the key is not the config
hash; the row's config_hash column is), stored by the sweep's store (records.py) at that fixed path,
atomically: a run is written once, and a rerun finds it. In front of the sweep columns'
and the space's, each row carries the trial columns below; the objectives are the
result's own metric columns.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from cluster.results.schemas import Column
from cluster.sweep.dataset import read_dataset
from cluster.sweep.points import Point
from cluster.sweep.records import STATUS_OK, SWEEP_FIELDS, PointRun, Store

FULL = "full"  # the fidelity of a run that was not cut (uncapped, or finished before its cap)
NOT_RUN = "not-run"  # the fidelity of a trial a known constraint rejected before simulating

TRIAL_COLUMNS = [
    Column("trial", pa.int64(), "the candidate's number (its runs at every rung share it)"),
    Column("rung", pa.int32(), "successive-halving rung of this run (0 the cheapest; without [explore.fidelity] 0)"),
    Column("fidelity", pa.string(), f"{FULL} (not cut), max_cycles=N (cut at N cycles: a cheap proxy) or {NOT_RUN} "
                                    "(a known constraint or an invalid config: never simulated)"),
    Column("optimizer", pa.string(), "the optimiser that proposed the candidate"),
    Column("feasible", pa.bool_(), "ran to a usable result: constraints held, no failure, deadlock or cut-off"),
    Column("params", pa.string(), "the candidate's parameter values as JSON (the space's active keys)"),
]
TRIAL_FIELDS = [pa.field(c.name, c.type) for c in TRIAL_COLUMNS]


def trial_key(trial: int, rung: int) -> str:
    return f"t{trial:06d}r{rung}"


@dataclass(frozen=True)
class TrialPoint(Point):
    """A sweep point that is one run of a trial."""

    trial: int
    rung: int
    fidelity: str
    optimizer: str
    params: dict
    feasible: bool = False


class TrialStore(Store):
    """The sweep store with the trial columns after the sweep's own."""

    def columns(self, point: Point, run: PointRun) -> tuple[list[pa.Field], list]:
        fields, values = super().columns(point, run)
        assert isinstance(point, TrialPoint)
        feasible = point.feasible and run.status == STATUS_OK  # a point that could not be stored is not
        return fields + TRIAL_FIELDS, values + [point.trial, point.rung, point.fidelity, point.optimizer, feasible,
                                                json.dumps(point.params, sort_keys=True)]

    def prefix_names(self) -> set[str]:
        """The columns the store puts in front of a job's own (dropped to reuse a stored row as a job's result)."""
        return {f.name for f in SWEEP_FIELDS + self.plan.axes.fields + TRIAL_FIELDS}


@dataclass(frozen=True)
class StoredRun:
    """One stored row read back: what the optimiser's state and the promotion rule are rebuilt from."""

    trial: int
    rung: int
    fidelity: str
    optimizer: str
    feasible: bool
    params: dict
    values: tuple[float, ...]  # the objectives (NaN where the row has none)
    ok: bool  # the run itself succeeded (point_status ok)
    status: str | None  # the result's status column (completed, cut_off, deadlocked, failed; None if absent)


def read_runs(dataset: Path, metrics: list[str]) -> tuple[list[StoredRun], pa.Table | None]:
    """Every stored run (by trial, then rung) and the table they came from; ([], None) before the first."""
    if not dataset.is_dir() or not any(dataset.rglob("*.parquet")):
        return [], None
    table = read_dataset(dataset)
    table = table.sort_by([("trial", "ascending"), ("rung", "ascending")])
    names = ["trial", "rung", "fidelity", "optimizer", "feasible", "params", "point_status", "status",
             *metrics]
    cols: dict[str, list[Any]] = {name: table[name].to_pylist() if name in table.column_names
                                  else [None] * table.num_rows for name in names}
    out = []
    for i in range(table.num_rows):
        values = tuple(_finite(cols[m][i]) for m in metrics)
        out.append(StoredRun(cols["trial"][i], cols["rung"][i], cols["fidelity"][i], cols["optimizer"][i],
                             bool(cols["feasible"][i]), json.loads(cols["params"][i] or "{}"), values,
                             cols["point_status"][i] == STATUS_OK, cols["status"][i]))
    return out, table


def _finite(v) -> float:
    return float(v) if v is not None and isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def final_runs(runs: list[StoredRun]) -> list[StoredRun]:
    """The full-fidelity run of each trial that has one (what a front is made of)."""
    return [r for r in runs if r.fidelity == FULL]

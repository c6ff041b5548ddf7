"""The hypervolume's reference point: given per objective in the spec, else derived from the base config's own run.

A hypervolume means something only against a reference the reader can interpret. The default
is the base config's own run (the design the exploration starts from), made twice as bad in
every objective: a minimised objective's reference is 2 x the base's value, a maximised one's
half of it. The front's hypervolume is then the volume of designs up to twice as bad as the
base in each objective that the front dominates, and a trial worse than that in some
objective adds nothing. The base is run once per exploration, in full, beside the first
trials, and kept in ``DIR/base.parquet`` (a rerun reuses it). An objective the base run gives
no usable value for (it did not complete, or its value is 0 or negative) falls back to the
worst feasible value plus 10 % of the range, and the output says which rule each objective's
reference came from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cluster.config import config_hash
from cluster.config.identity import ConfigIdentity
from cluster.config.schema import validate
from cluster.explore.pareto import as_losses, reference_point
from cluster.results import writer
from cluster.sweep.points import Point

BASE_FILE = "base.parquet"
BASE_TABLE = b"explore_base"
BASE_PREFIX = "base-"  # a base point's id: this and what its config asks for
POINT_ID = "point_id"  # the base row's column of that id (without the prefix)
FACTOR = 2.0  # the default reference: the base run's value, this many times worse
GIVEN, FROM_BASE, FALLBACK = "explore.reference", "base run", "worst feasible + 10 %"


@dataclass(frozen=True)
class BasePoint(Point):
    """The base config's own run (not a trial): where the default reference comes from."""


@dataclass(frozen=True)
class Reference:
    values: dict[str, float]  # per objective metric, in its own direction
    sources: dict[str, str]  # per objective metric: which rule gave it (GIVEN, FROM_BASE or FALLBACK)

    def losses(self, objectives) -> np.ndarray:
        return as_losses(np.array([[self.values[o.metric] for o in objectives]]), [o.maximize for o in objectives])[0]

    def parts(self, objectives) -> list[tuple[str, str, str]]:
        """(metric, its reference with its unit, the rule that gave it) of each objective."""
        from cluster.report import labels, units

        out = []
        for o in objectives:
            rule = self.sources[o.metric]
            if rule == FROM_BASE:
                rule = f"base run {'/' if o.maximize else 'x'} {FACTOR:g}"
            unit = labels.metric_parts(o.metric)[1]
            v = self.values[o.metric]
            shown = units.engineering(v, unit) if units.prefixable(unit) \
                else units.count(v) + (f" {unit}" if unit else "")
            out.append((o.metric, shown, rule))
        return out

    def describe(self, objectives) -> str:
        """'tokens_per_second = 345k (base run / 2), ...': each objective's reference and its rule."""
        return ", ".join(f"{metric} = {shown} ({rule})" for metric, shown, rule in self.parts(objectives))


def base_point(spec) -> BasePoint | None:
    """The base config as a point to run, its id what the config asks for (cluster/config/identity.py), so a
    new config key or another clone keep it (None if the base alone is not a valid config: no base reference)."""
    schema = spec.command.schema()
    cfg, issues = validate(spec.base, schema)
    if issues:
        return None
    return BasePoint(-1, f"{BASE_PREFIX}{ConfigIdentity(schema).point_id(cfg)}", {}, cfg)


def read_base(out: Path, point: BasePoint | None, earlier: str | None = None) -> dict | None:
    """The stored base run's result row, if it is this base config's (else None: it must run): by its id, or,
    a row stored before rows carried one, by ``earlier``: the id the earlier rule gave the stored spec
    version's base (the hash of the whole resolved config, files by the paths they had; known.py)."""
    path = Path(out) / BASE_FILE
    if point is None or not path.is_file():
        return None
    rows = pq.read_table(path).to_pylist()
    if not rows:
        return None
    stored = rows[0].get(POINT_ID)
    mine = stored == point.id.removeprefix(BASE_PREFIX) if stored else \
        earlier is not None and rows[0].get("config_hash") == earlier
    return rows[0] if mine else None


def write_base(out: Path, result: pa.Table | None, point: BasePoint, error: str | None = None) -> dict:
    """Store the base run's result row (or, if it raised, a row saying so) atomically; return the row. Its
    config_hash stays the run's record of what ran; its point_id is what a rerun knows it by."""
    row = result.slice(0, 1).to_pylist()[0] if result is not None and result.num_rows else {}
    table = result.slice(0, 1) if row and result is not None else None
    extra = {POINT_ID: point.id.removeprefix(BASE_PREFIX), "base_error": error}
    if "config_hash" not in row:
        extra = {"config_hash": config_hash(point.config), **extra}
    row = {**row, **extra}
    if table is None:
        table = pa.Table.from_pylist([row])
    else:
        for name, value in extra.items():
            table = table.drop_columns([name]) if name in table.column_names else table
            table = table.append_column(name, pa.array([value], type=pa.string()))
    meta = dict(table.schema.metadata or {})
    meta[b"table"] = BASE_TABLE  # not a run's table: the report does not draw it as one
    writer.write_table(table.replace_schema_metadata(meta), Path(out) / BASE_FILE)
    return row


def _from_base(row: dict | None, metric: str, maximize: bool) -> float | None:
    """The base run's value of ``metric`` made FACTOR times worse, if the run completed with a positive value."""
    if not row or row.get("status", "completed") != "completed":
        return None
    v = row.get(metric)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
        return None
    return float(v) / FACTOR if maximize else float(v) * FACTOR


def reference(objectives, given: dict[str, float] | None, base: dict | None,
              feasible_losses: np.ndarray) -> Reference | None:
    """Each objective's reference: the spec's, else from the base run, else the worst feasible + 10 %."""
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    fallback = reference_point(feasible_losses) if len(feasible_losses) else None
    for i, o in enumerate(objectives):
        if given is not None:
            values[o.metric], sources[o.metric] = float(given[o.metric]), GIVEN
        elif (v := _from_base(base, o.metric, o.maximize)) is not None:
            values[o.metric], sources[o.metric] = v, FROM_BASE
        elif fallback is not None:
            values[o.metric] = float(-fallback[i] if o.maximize else fallback[i])
            sources[o.metric] = FALLBACK
        else:
            return None
    return Reference(values, sources)

"""Small pure helpers over Arrow tables for the figures: finding columns, grouping, averaging."""

from __future__ import annotations

import math
from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc


class Skip(Exception):
    """A figure cannot be drawn from these tables (the message says what is missing)."""


def numeric(table: pa.Table, name: str) -> bool:
    t = table.schema.field(name).type
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def first(table: pa.Table, candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if c in table.column_names), None)


def present(column: str | None, what: str) -> str:
    """``column``, which the table a figure chose must have (``Skip`` naming ``what`` otherwise)."""
    if column is None:
        raise Skip(f"no {what} column")
    return column


def containing(table: pa.Table, word: str, prefer: tuple[str, ...] = ()) -> str | None:
    """A numeric column whose name contains ``word``, preferring names that contain a ``prefer`` word."""
    cols = [c for c in table.column_names if word in c and numeric(table, c)]
    for p in prefer:
        for c in cols:
            if p in c:
                return c
    return cols[0] if cols else None


def find_table(tables: dict[str, pa.Table], need) -> tuple[str, pa.Table]:
    """The first table for which ``need(table)`` is true."""
    for name, t in tables.items():
        if need(t):
            return name, t
    raise Skip("no table with the columns it needs")


def only_ok(table: pa.Table) -> pa.Table:
    """Drop a sweep's error rows (their metrics are null)."""
    if "point_status" in table.column_names:
        return table.filter(pc.equal(table["point_status"], "ok"))
    return table


def _finite(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def grouped(table: pa.Table, x: str, y: str, hue: str | None = None) -> dict:
    """{hue value: (xs, mean y, min y, max y)} with xs sorted; rows with a missing y are left out (grouped by
    Arrow: a memory time series has a row per unit per sample)."""
    t = table.select([x, y] + ([hue] if hue and hue not in (x, y) else []))
    keep = pc.and_(pc.is_valid(t[y]), pc.is_valid(t[x]))
    if pa.types.is_floating(t.schema.field(y).type):
        keep = pc.and_(keep, pc.invert(pc.is_nan(t[y])))
    t = t.filter(keep)
    if not t.num_rows:
        return {}
    keys = [hue, x] if hue else [x]
    acc: dict = defaultdict(dict)
    for r in t.group_by(keys).aggregate([(y, "mean"), (y, "min"), (y, "max")]).to_pylist():
        acc[r[hue] if hue else None][r[x]] = (float(r[f"{y}_mean"]), float(r[f"{y}_min"]), float(r[f"{y}_max"]))
    out = {}
    for hv in sorted(acc, key=lambda v: (v is None, str(v) if not isinstance(v, (int, float)) else v)):
        xs = sorted(acc[hv], key=lambda v: (isinstance(v, str), v))
        out[hv] = (xs, [acc[hv][v][0] for v in xs], [acc[hv][v][1] for v in xs], [acc[hv][v][2] for v in xs])
    return out


def distinct(table: pa.Table, name: str) -> list:
    return [v for v in pc.unique(table[name]).to_pylist() if v is not None]

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
    """{hue value: (xs, mean y, min y, max y)} with xs sorted; rows with a missing y are left out."""
    cols = [table[x].to_pylist(), table[y].to_pylist(), table[hue].to_pylist() if hue else [None] * table.num_rows]
    acc: dict = defaultdict(lambda: defaultdict(list))
    for xv, yv, hv in zip(*cols):
        if _finite(yv) and xv is not None:
            acc[hv][xv].append(float(yv))
    out = {}
    for hv in sorted(acc, key=lambda v: (v is None, str(v) if not isinstance(v, (int, float)) else v)):
        xs = sorted(acc[hv], key=lambda v: (isinstance(v, str), v))
        ys = [acc[hv][v] for v in xs]
        out[hv] = (xs, [sum(v) / len(v) for v in ys], [min(v) for v in ys], [max(v) for v in ys])
    return out


def distinct(table: pa.Table, name: str) -> list:
    return [v for v in pc.unique(table[name]).to_pylist() if v is not None]

"""Writing a finished point: its tables as atomic Parquet files at their fixed paths.

Other tables are written before the point's result file, so a valid result file means
the point is complete. A point whose job failed, or whose tables cannot be stored,
becomes one error row in the result dataset.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from cluster.config.schema import get_path
from cluster.results import io
from cluster.sweep.commands import pick_result
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.plan import SweepPlan
from cluster.sweep.points import Point
from cluster.sweep.records import (
    STATUS_ERROR,
    STATUS_OK,
    SWEEP_FIELDS,
    PointRun,
    decorate,
    error_table,
    file_metadata,
    prefix_values,
    read_status,
)

ORPHAN_AGE_SECONDS = 300.0  # a temporary file lives for the milliseconds of one write


class Store:
    """The point files of one sweep."""

    def __init__(self, plan: SweepPlan, layout: DatasetLayout):
        self.plan = plan
        self.layout = layout
        self.result_schema: pa.Schema | None = plan.command.result_schema()

    def path(self, point: Point, table: str | None = None) -> Path:
        values = {p: get_path(point.config, p) for p in self.layout.partition_by}
        return self.layout.point_file(point.id, values, table)

    def existing(self, point: Point) -> str | None:
        """Status of the point's valid stored result file (ok or error), or None."""
        found = read_status(self.path(point))
        return found[1] if found is not None and found[0] == point.id else None

    def columns(self, point: Point, run: PointRun) -> tuple[list[pa.Field], list]:
        """The constant columns in front of a point's rows (the sweep's, then the swept paths'), and their values."""
        plan = self.plan
        return (SWEEP_FIELDS + plan.axes.fields,
                prefix_values(plan.spec.name, plan.spec_hash, point, run) + plan.axes.values(point.config))

    def _decorate(self, table: pa.Table, point: Point, run: PointRun) -> pa.Table:
        fields, values = self.columns(point, run)
        plan = self.plan
        return decorate(table, values, fields, file_metadata(point, plan.spec.raw, run.status, plan.spec_hash))

    def write(self, point: Point, tables: dict[str, pa.Table] | None, run: PointRun) -> PointRun:
        """Store a finished point; returns its run (turned into an error if storing failed)."""
        if run.status == STATUS_OK:
            try:
                if tables is None:
                    raise ValueError("the point reported ok but returned no tables")
                name = pick_result(tables, self.plan.command.result)
                others = {t: self._decorate(tab, point, run) for t, tab in tables.items() if t != name}
                main = self._decorate(tables[name], point, run)
            except (ValueError, RuntimeError, pa.ArrowException) as exc:
                run = PointRun(STATUS_ERROR, run.attempts, run.node, run.seconds,
                               f"cannot store the point's tables: {exc}", None)
            else:
                if self.result_schema is None:
                    self.result_schema = tables[name].schema
                for table, decorated in others.items():
                    io.write_parquet(decorated, self.path(point, table))
                io.write_parquet(main, self.path(point))
                return run
        io.write_parquet(self._decorate(error_table(self.result_schema, point), point, run), self.path(point))
        return run

    def remove_orphans(self, now: float | None = None) -> int:
        """Delete temporary files that a killed writer left behind: its process is gone (a
        writer on this host), or the file is old enough for it to be dead (on another host)."""
        now = time.time() if now is None else now
        removed = 0
        if self.layout.dataset.is_dir():
            for tmp in self.layout.dataset.rglob(".*.tmp"):
                try:
                    if io.writer_gone(tmp) or now - tmp.stat().st_mtime > ORPHAN_AGE_SECONDS:
                        tmp.unlink()
                        removed += 1
                except FileNotFoundError:
                    pass
        return removed

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
from cluster.results.writer import write_table
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
    point_form,
    prefix_values,
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

    def columns(self, point: Point, run: PointRun) -> tuple[list[pa.Field], list]:
        """The constant columns in front of a point's rows (the sweep's, then the swept paths'), and their values."""
        plan = self.plan
        return (SWEEP_FIELDS + plan.axes.fields,
                prefix_values(plan.spec.name, plan.spec_hash, point, run) + plan.axes.values(point.config))

    def _write(self, table: pa.Table, point: Point, run: PointRun, path: Path, fields: list[pa.Field]) -> None:
        """One table of a point, atomically; its footer names the point (records.point_form)."""
        footer = {**(table.schema.metadata or {}), **file_metadata(point, run.status, self.plan.spec_hash)}
        write_table(table, path, footer, point_form(fields))

    def write(self, point: Point, tables: dict[str, pa.Table] | None, run: PointRun) -> PointRun:
        """Store a finished point; returns its run (turned into an error if storing failed)."""
        if run.status == STATUS_OK:
            fields, values = self.columns(point, run)
            try:
                if tables is None:
                    raise ValueError("the point reported ok but returned no tables")
                name = pick_result(tables, self.plan.command.result)
                others = {t: decorate(tab, values, fields) for t, tab in tables.items() if t != name}
                main = decorate(tables[name], values, fields)
            except (ValueError, RuntimeError, pa.ArrowException) as exc:
                run = PointRun(STATUS_ERROR, run.attempts, run.node, run.seconds,
                               f"cannot store the point's tables: {exc}", None)
            else:
                if self.result_schema is None:
                    self.result_schema = tables[name].schema
                for table, decorated in others.items():
                    self._write(decorated, point, run, self.path(point, table), fields)
                self._write(main, point, run, self.path(point), fields)
                return run
        fields, values = self.columns(point, run)
        self._write(decorate(error_table(self.result_schema, point), values, fields), point, run, self.path(point),
                    fields)
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

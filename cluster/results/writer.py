"""The one writer of every table that reaches disk, and of a run's side files and run.json.

A run's tables, a sweep's point files, an exploration's trials, a compaction's files and
the allocator reports all go through ``write_table``: atomically (io.py), in the form
(``TableForm``) their readers expect. A run's files land where layout.py says, run.json
last, so that its presence says the run's files are all there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from cluster.results import io, layout


@dataclass(frozen=True)
class TableForm:
    """How a table is laid out in its file: Parquet (the writer's options) or CSV.

    The defaults are pyarrow's own (``pyarrow.parquet.write_table``'s): a run's tables. A
    sweep's point file keeps its footer small (no serialised Arrow schema, no dictionary
    pages, statistics of a few columns: cluster/sweep/records.py); a compacted file keeps
    statistics of all but its unbounded text and is on disk before what it replaces goes."""

    csv: bool = False
    statistics: bool | tuple[str, ...] = True  # min/max statistics: of every column, or of these
    store_schema: bool = True  # the serialised Arrow schema in the footer
    dictionary: bool = True  # dictionary-encoded pages
    row_group: int | None = None  # rows a row group holds (None: pyarrow's default)
    durable: bool = False  # fsync the file before it is renamed into place

    def options(self) -> dict:
        """pyarrow.parquet.ParquetWriter's options for this form (only those that differ from its defaults:
        the same calls, so the same bytes, as before there was one writer)."""
        out: dict = {}
        if not self.store_schema:
            out["store_schema"] = False
        if not self.dictionary:
            out["use_dictionary"] = False
        if self.statistics is not True:
            out["write_statistics"] = self.statistics if isinstance(self.statistics, bool) else list(self.statistics)
        return out


PARQUET = TableForm()
CSV = TableForm(csv=True)


def write_table(table: pa.Table, path: str | Path, footer: Mapping[bytes, bytes] | None = None,
                form: TableForm = PARQUET) -> Path:
    """``table`` at ``path``, atomically, in ``form``; ``footer``: key-value metadata added to a Parquet
    file's footer (what a reader learns without reading a row)."""
    with io.atomic_path(path) as tmp:
        if form.csv:
            pacsv.write_csv(table, tmp)
        else:
            with pq.ParquetWriter(str(tmp), table.schema, **form.options()) as w:
                w.write_table(table, row_group_size=form.row_group)
                if footer:
                    w.add_key_value_metadata(dict(footer))
        if form.durable:
            _sync(tmp)
    return Path(path)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_run(out: str | Path | layout.RunOutput, run_id: str, tables: Mapping[str, pa.Table],
              files: Mapping[str, object], record: dict) -> list[Path]:
    """A run's ``tables`` and side ``files`` in ``out``, then its ``record`` as run.json."""
    written = [write_table(table, layout.table_path(out, name, run_id)) for name, table in tables.items()]
    written += write_side(out, run_id, files)
    written.append(io.write_json(record, layout.side_path(out, "run.json", run_id)))
    return written


def write_side(out: str | Path | layout.RunOutput, run_id: str, files: Mapping[str, object]) -> list[Path]:
    """A run's side ``files`` (by name) in ``out`` (a run's --out, or the directory a file is asked in)."""
    return [put(content, layout.side_path(out, name, run_id)) for name, content in files.items()]


def put(content: object, path: str | Path) -> Path:
    """One side file: text as it is, anything else as JSON."""
    return io.write_text(content, path) if isinstance(content, str) else io.write_json(content, path)


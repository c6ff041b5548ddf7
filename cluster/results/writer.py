"""The one writer of a result (cluster/results/record.py): its tables, side files and run.json,
each atomically (io.py), where layout.py says, run.json last so that its presence says the
run's files are all there."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cluster.results import io, layout
from cluster.results.record import Result


def write(result: Result, out: str | Path | layout.RunOutput, skip: Iterable[str] = ()) -> list[Path]:
    """Every table of ``result`` and every side file but those in ``skip`` in ``out``, then run.json."""
    rid = result.summary.run_id
    files = [io.write_parquet(table, layout.table_path(out, name, rid)) for name, table in result.tables.items()]
    files += write_side(result, out, [name for name in result.files if name not in set(skip)])
    files.append(io.write_json(result.record(), layout.side_path(out, "run.json", rid)))
    return files


def write_side(result: Result, out: str | Path | layout.RunOutput, names: Iterable[str]) -> list[Path]:
    """The side files ``names`` of ``result`` in ``out`` (a run's --out, or the directory a file is asked in)."""
    return [put(result.files[name], layout.side_path(out, name, result.summary.run_id)) for name in names]


def put(content: str | dict | list, path: str | Path) -> Path:
    """One side file: text as it is, anything else as JSON."""
    return io.write_text(content, path) if isinstance(content, str) else io.write_json(content, path)

"""Where result tables land: each table its own Parquet dataset, side files beside the tables.

    DIR/<table>/run=<run id>/<run id>.<table>.parquet      a run's table (rdasim noc, run, map --out DIR)
    DIR/run.json, DIR/action_counts.yaml, ...                  its side files (--add: DIR/runs/<run id>/...)
    DIR/<sweep>/<table>/sweep_id=<sweep>/<k>=<v>/.../<point id>.<table>.parquet    a sweep's (cluster/sweep/layout.py)

So ``DIR/<table>/`` is one dataset (``pyarrow.dataset.dataset`` reads it), and the files
of one table anywhere in a results tree match one glob, ``**/*.<table>.parquet``, whatever
the depth (DuckDB allows one ``**`` per pattern). Nothing but Parquet files of that table
lives in a table's directory. A run into a directory holding another run's tables is
refused unless told to ``replace`` them (deleted first) or ``add`` to them (runs accumulate,
one ``run=`` partition each), the words ``rdasim sweep`` uses for its own.
"""

from __future__ import annotations

import difflib
import math
import os
import shutil
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.errors import UserError

if TYPE_CHECKING:
    import pyarrow.dataset as ds

NULL_SEGMENT = "__HIVE_DEFAULT_PARTITION__"  # what pyarrow, Spark and Hive call a null partition
EXISTING = ("refuse", "add", "replace")  # what to do with another run's (or sweep version's) stored results
# a run's side files, which --replace removes (memory_map_* beside them)
SIDE_FILES = ("run.json", "action_counts.yaml", "ERT.yaml", "plan.json", "trace.json")
RUNS = "runs"  # DIR/runs/<run id>/: the side files of runs added with --add
SUFFIX = ".parquet"


def table_names() -> tuple[str, ...]:
    """Every table rdasim writes (cluster/results/schemas.py)."""
    from cluster.results import schemas

    return tuple(t.name for t in schemas.ALL_TABLES)


def segment_value(value) -> str:
    """A partition value as a directory name (URI-escaped, as pyarrow and DuckDB decode it)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NULL_SEGMENT
    if isinstance(value, bool):
        return "true" if value else "false"
    return urllib.parse.quote(str(value), safe="")


def table_file(root: str | Path, table: str, partitions: list[tuple[str, object]], file_id: str) -> Path:
    """``root/<table>/<key>=<value>/.../<file_id>.<table>.parquet``: the one place a table file's path is made."""
    parts = [f"{k}={segment_value(v)}" for k, v in partitions]
    return Path(root, table, *parts, f"{segment_value(file_id)}.{table}{SUFFIX}")


def glob(table: str) -> str:
    """The glob that matches every file of ``table`` under a results tree, at any depth."""
    return f"**/*.{table}{SUFFIX}"


def table_files(root: str | Path, table: str) -> list[Path]:
    """Every Parquet file of ``table`` under ``root`` (a run's --out, a sweep, or a whole results tree)."""
    return sorted(p for p in Path(root).glob(glob(table)) if not p.name.startswith("."))


def unreadable(path: str | Path, exc: BaseException) -> UserError:
    """The error for a Parquet file that cannot be read (cut short or corrupted by something other than rdasim's
    atomic writes): the file and what is wrong, exit 2."""
    what = str(exc).split(". ")[0] if str(exc) else type(exc).__name__
    return UserError(f"{path}: not a readable Parquet file ({what}); move it aside (a sweep's rerun recomputes "
                     "the point it held)")


def parquet_schema(path: str | Path) -> pa.Schema:
    """A Parquet file's schema; a file that cannot be read is a UserError naming it."""
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise unreadable(path, exc) from None


def open_files(files: list[Path] | list[str]) -> ds.Dataset:
    """A pyarrow dataset of these files, its schema the union of theirs (columns matched by name)."""
    import pyarrow.dataset as ds  # here, not at the top: it imports pandas (0.2 s on every `rdasim run`)

    schemas = {parquet_schema(f) for f in files}
    schema = pa.unify_schemas(list(schemas)) if len(schemas) > 1 else None
    return ds.dataset([str(f) for f in files], format="parquet", schema=schema)


def read_table(root: str | Path, table: str, columns: list[str] | None = None, filter=None) -> pa.Table:
    """One table across a whole results tree, schemas unified; empty when there is none. A sweep's
    compaction interrupted half way is read as if done (cluster/sweep/reading.py): every row once."""
    from cluster.sweep.reading import read_consistently, staged_of

    def read(view) -> pa.Table:
        return open_files(view.files).to_table(columns=columns, filter=filter) if view.files else pa.table({})

    return read_consistently(lambda: table_files(root, table), lambda: staged_of(Path(root), table), read)


def read(root: str | Path, table: str, columns: list[str] | None = None, filter=None) -> pa.Table:
    """``table`` across a results tree (a run's --out, a sweep's or an exploration's, or a tree of
    them), for a reader (``rdasim.read``): a table rdasim does not write, or a directory that is
    not there, is a UserError; a table nothing in the tree wrote is empty, with its columns."""
    from cluster.results import schemas

    if not Path(root).is_dir():
        raise UserError(f"{str(root)!r} is not a directory of results")
    known = {t.name: t for t in schemas.ALL_TABLES}
    if table not in known:
        close = difflib.get_close_matches(table, list(known), n=1)
        raise UserError(f"unknown table {table!r}; " + (f"did you mean {close[0]!r}?" if close else
                                                         f"known: {', '.join(known)}"))
    found = read_table(root, table, columns, filter)
    return found if found.num_columns else known[table].arrow.empty_table().select(columns or known[table].arrow.names)


# ----------------------------------------------------------------------------- a run's --out
@dataclass(frozen=True)
class RunOutput:
    """A run's --out directory and whether runs accumulate in it (``--add``)."""

    root: Path
    add: bool = False

    def table(self, table: str, run_id: str) -> Path:
        # keyed "run", not "run_id": a hive reader (pq.read_table(dir), pd.read_parquet(dir)) adds the key as a
        # column, which must not clash with the run_id column every file carries
        return table_file(self.root, table, [("run", run_id)], run_id)

    def side(self, name: str, run_id: str) -> Path:
        """A side file (YAML, JSON, text): in DIR, or in DIR/runs/<run id>/ when runs accumulate."""
        return self.root / RUNS / segment_value(run_id) / name if self.add else self.root / name


def run_output(out: str | Path | RunOutput) -> RunOutput:
    return out if isinstance(out, RunOutput) else RunOutput(Path(out))


def table_path(out: str | Path | RunOutput, table: str, run_id: str) -> Path:
    """Where a run's ``table`` lands in ``out`` (a path, or a RunOutput saying whether runs accumulate)."""
    return run_output(out).table(table, run_id)


def side_path(out: str | Path | RunOutput, name: str, run_id: str) -> Path:
    """Where a run's side file ``name`` lands in ``out``."""
    return run_output(out).side(name, run_id)


def stored_tables(root: Path) -> dict[str, list[str]]:
    """The tables of earlier runs in ``root``: {table: its run ids} (flat ``<table>.parquet`` files of
    older rdasim: run id '?')."""
    found: dict[str, list[str]] = {}
    if not root.is_dir():
        return found
    for name in table_names():
        d = root / name
        if d.is_dir() and any(d.rglob(f"*{SUFFIX}")):
            found[name] = sorted(p.name.split("=", 1)[1] for p in d.glob("run=*")) or ["?"]
    for f in sorted(root.glob(f"*{SUFFIX}")):
        if f.stem in table_names():
            found.setdefault(f.stem, ["?"])
    return found


def prepare(out: str | Path, existing: str = "refuse") -> RunOutput:
    """Check a run's --out before the work: refuse one holding another run's tables (exit 2, one line
    naming them) unless ``existing`` is "replace" (delete them and the side files now) or "add"."""
    from cluster.results.io import check_dir

    if existing not in EXISTING:
        raise UserError(f"existing = {existing!r}: one of {', '.join(EXISTING)}")
    root = check_dir(out)
    found = stored_tables(root)
    if found and existing == "refuse":
        runs = sorted({r for ids in found.values() for r in ids if r != "?"})
        which = f" of run {', '.join(runs[:3])}{' ...' if len(runs) > 3 else ''}" if runs else ""
        raise UserError(f"--out {out}: holds another run's tables ({', '.join(sorted(found))}{which}); "
                        "rerun with --replace to delete them first, or --add to keep them and add this run's "
                        "(one run= partition per run)")
    if existing == "replace":
        remove_run_outputs(root)
    return RunOutput(root, add=existing == "add")


def remove_run_outputs(root: Path) -> None:
    """Delete what earlier runs wrote in ``root``: their tables and side files (nothing else)."""
    for name in table_names():
        if (root / name).is_dir():
            shutil.rmtree(root / name)
        (root / f"{name}{SUFFIX}").unlink(missing_ok=True)
    if (root / RUNS).is_dir():
        shutil.rmtree(root / RUNS)
    for name in SIDE_FILES:
        (root / name).unlink(missing_ok=True)
    for f in root.glob("memory_map_*"):
        if f.suffix in (".txt", ".json") and f.is_file():
            os.unlink(f)

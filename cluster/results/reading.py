"""Reading a results tree (``read_table``, and ``read`` for ``rdasim.read``): every row once, never a gap,
even while a sweep's compaction is interrupted or running.

A compaction (compact.py) stages its file, deletes the files it replaces, then renames it
into place; between the first delete and the rename the visible files miss the points being
moved. A reader that finds a staged file reads it in place of the files it replaces (its
points' own files, the compacted files its footer names), so it sees the points either in
their own files or in the staged one, whichever step the compaction is at. It changes
nothing on disk (a reader may have no right to): the next ``rdasim sweep`` command on the
sweep finishes the compaction. A plain ``**/*.parquet`` glob cannot do this (docs/sweeps.md).
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.errors import UserError
from cluster.results.layout import COMPACTED, STAGED, is_compacted, open_files, point_of, table_files

REPLACES = b"rdasim.replaces"  # a staged file's footer key: the compacted files it replaces (compact.py writes it)


@dataclass(frozen=True)
class ReaderView:
    """The files to read, and the staged files among them (read in place of what they replace)."""

    files: list[Path]
    staged: list[Path]

    def warning(self) -> str | None:
        """What the reader is told when it reads staged files (None: no compaction was half done)."""
        if not self.staged:
            return None
        where = sorted({str(s.parent) for s in self.staged})
        return (f"rdasim: warning: a compaction was interrupted (or is running) in {', '.join(where[:2])}"
                f"{' ...' if len(where) > 2 else ''}: read its {len(self.staged)} staged file(s) in place of the "
                "files they replace; `rdasim sweep status` (or compact, or a rerun) finishes it")


def staged_of(root: Path, table: str | None = None) -> list[Path]:
    """The staged compacted files under ``root`` (of ``table``, or of every table)."""
    pattern = f".{COMPACTED}*.{table}.parquet{STAGED}" if table else f".{COMPACTED}*{STAGED}"
    return sorted(root.rglob(pattern)) if root.is_dir() else []


def reader_view(files: list[Path], staged: list[Path]) -> ReaderView:
    """``files`` (visible table files) with each of ``staged`` read in place of the files it replaces."""
    if not staged:
        return ReaderView(files, [])
    replaced: set[Path] = set()
    for s in staged:
        meta = pq.read_metadata(s)
        replaced.update(s.parent / name for name in json.loads((meta.metadata or {}).get(REPLACES, b"[]")))
        points = set(pq.read_table(s, columns=["point_id"]).column(0).to_pylist())
        suffix = s.name[1:-len(STAGED)].split(".", 1)[1]  # <table>.parquet
        replaced.update(f for f in files if f.parent == s.parent and not is_compacted(f)
                        and f.name.split(".", 1)[1] == suffix and point_of(f) in points)
    return ReaderView(sorted([f for f in files if f not in replaced] + staged), staged)


def read_consistently(list_files: Callable[[], list[Path]], list_staged: Callable[[], list[Path]], read,
                      tries: int = 3):
    """``read(view)`` of the files a reader should see, told on stderr when staged files stand in. The
    staged files are listed before and after the others: if a running compaction staged or renamed one
    in between, or moved a listed file away before it was read, everything is listed afresh."""
    for attempt in range(tries):
        before = list_staged()
        files = list_files()
        staged = list_staged()
        try:
            view = reader_view(files, staged)
            out = read(view)
        except Exception:
            if attempt + 1 < tries and not all(f.exists() for f in files + staged):
                continue  # a running compaction deleted or renamed one of them: list again
            raise
        if staged != before and attempt + 1 < tries:
            continue
        message = view.warning()
        if message:
            print(message, file=sys.stderr)
        return out
    raise AssertionError("unreachable")


def read_table(root: str | Path, table: str, columns: list[str] | None = None, filter=None) -> pa.Table:
    """One table across a whole results tree, schemas unified; empty when there is none. A sweep's
    compaction interrupted half way is read as if done: every row once."""

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

"""What a reader reads while a compaction is interrupted or running: every row once, never a gap.

A compaction (compact.py) stages its file, deletes the files it replaces, then renames it
into place; between the first delete and the rename the visible files miss the points being
moved. A reader that finds a staged file reads it in place of the files it replaces (its
points' own files, the compacted files its footer names), so it sees the points either in
their own files or in the staged one, whichever step the compaction is at. It changes
nothing on disk (a reader may have no right to): the next ``rdasim sweep`` command on the
sweep finishes the compaction. A plain ``**/*.parquet`` glob cannot do this (docs/sweeps.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from cluster.sweep.layout import COMPACTED, STAGED, is_compacted, point_of

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

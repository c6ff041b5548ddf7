"""Atomic result files: write to a temporary name in the same directory, then rename.

A failed or interrupted run therefore never leaves a half-written Parquet, CSV or JSON
file behind: readers see either the old file, the complete new one, or nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path next to ``path``; rename it into place only on success."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_parquet(table: pa.Table, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return Path(path)


def write_csv(table: pa.Table, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        pacsv.write_csv(table, tmp)
    return Path(path)


def write_json(obj, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    return Path(path)


def write_text(text: str, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)

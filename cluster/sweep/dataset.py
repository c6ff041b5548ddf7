"""Reading a sweep's (or a run's) table back with every column's type as written.

Every file carries all its columns, the partition keys included, typed; the hive
directories are for pruning and browsing. So the files, not the directory names, are
read: no reader turns a number back into a string. Schemas are unified by column name
(error rows stored before a result's schema was known lack its columns).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from cluster.results.layout import open_files
from cluster.sweep.layout import DatasetLayout, dataset_files, of_manifest
from cluster.sweep.reading import ReaderView, read_consistently, reader_view, staged_of


def table_dir(path: str | Path, table: str | None = None) -> Path:
    """The directory of one table: ``path`` itself, ``path/<table>`` (a run's --out), or for a sweep's
    directory its result table (or ``table``), in whichever layout the sweep was written."""
    path = Path(path)
    own = DatasetLayout(path.parent, path.name)
    for manifest in (own.manifest, own.legacy_manifest):
        if manifest.is_file():
            return of_manifest(manifest).table_dir(table)
    return path / table if table else path


def open_dataset(path: str | Path, table: str | None = None) -> ds.Dataset:
    """A pyarrow dataset of one table (see ``table_dir``), schema unified over its files; a compaction
    interrupted half way is read as if done (reading.py), and the reader told."""
    d = table_dir(path, table)
    view = reader_view(dataset_files(d), staged_of(d))
    if view.warning():
        print(view.warning(), file=sys.stderr)
    return open_files(view.files) if view.files else ds.dataset([], schema=pa.schema([]))


def read_dataset(path: str | Path, columns: list[str] | None = None, filter=None, table: str | None = None
                 ) -> pa.Table:
    d = table_dir(path, table)

    def read(view: ReaderView) -> pa.Table:
        return open_files(view.files).to_table(columns=columns, filter=filter) if view.files else \
            ds.dataset([], schema=pa.schema([])).to_table(columns=columns, filter=filter)

    return read_consistently(lambda: dataset_files(d), lambda: staged_of(d), read)

"""Reading a sweep's (or a run's) table back with every column's type as written.

Every file carries all its columns, the partition keys included, typed; the hive
directories are for pruning and browsing. So the files, not the directory names, are
read: no reader turns a number back into a string. Schemas are unified by column name
(error rows stored before a result's schema was known lack its columns).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from cluster.results.layout import open_files
from cluster.sweep.layout import DatasetLayout, dataset_files, of_manifest


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
    """A pyarrow dataset of one table (see ``table_dir``), schema unified over its files."""
    files = dataset_files(table_dir(path, table))
    return open_files(files) if files else ds.dataset([], schema=pa.schema([]))


def read_dataset(path: str | Path, columns: list[str] | None = None, filter=None, table: str | None = None
                 ) -> pa.Table:
    return open_dataset(path, table).to_table(columns=columns, filter=filter)

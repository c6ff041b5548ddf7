"""Reading a sweep's dataset back with every column's type as written.

Every file carries all its columns, the partition keys included, typed; the hive
directories are for pruning and browsing. So the files, not the directory names, are
read (``partitioning=None``): no reader turns a number back into a string.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds


def open_dataset(path: str | Path) -> ds.Dataset:
    """A pyarrow dataset of a sweep (or sibling table) directory, schema unified over its files."""
    files = ds.dataset(str(path), format="parquet", partitioning=None)
    schemas = {f.physical_schema for f in files.get_fragments()}
    if len(schemas) > 1:  # error rows written before the result's schema was known
        files = ds.dataset(str(path), format="parquet", partitioning=None,
                           schema=pa.unify_schemas(list(schemas)))
    return files


def read_dataset(path: str | Path, columns: list[str] | None = None, filter=None) -> pa.Table:
    return open_dataset(path).to_table(columns=columns, filter=filter)

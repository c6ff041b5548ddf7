"""Where a sweep's files live: the hive-partitioned dataset, its sibling tables and the manifest.

    DIR/<name>/sweep_id=<name>/<key>=<value>/.../<point_id>.parquet    the points' result rows
    DIR/<name>.<table>/sweep_id=<name>/<key>=<value>/.../<point_id>.parquet   other tables of a point
    DIR/<name>.manifest.json                                           spec, runs, every point's status

A point's file name is its id, so a point computed twice (a retry after a node died)
lands on the same path and is replaced atomically: never two files for one point.
Only Parquet files live in the dataset directories, so every reader can scan them.
"""

from __future__ import annotations

import math
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

NULL_SEGMENT = "__HIVE_DEFAULT_PARTITION__"  # what pyarrow, Spark and Hive call a null partition
MANIFEST_SUFFIX = ".manifest.json"


def column_name(path: str) -> str:
    """Dataset column of a swept config path: 'noc.rate' -> 'noc_rate'."""
    return path.replace(".", "_")


def segment_value(value) -> str:
    """A partition value as a directory name (URI-escaped, as pyarrow and DuckDB decode it)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NULL_SEGMENT
    if isinstance(value, bool):
        return "true" if value else "false"
    return urllib.parse.quote(str(value), safe="")


@dataclass(frozen=True)
class DatasetLayout:
    root: Path  # the --out directory
    name: str  # the sweep name
    partition_by: tuple[str, ...] = ()  # dotted config paths

    @property
    def dataset(self) -> Path:
        return self.root / self.name

    @property
    def manifest(self) -> Path:
        return self.root / f"{self.name}{MANIFEST_SUFFIX}"

    def table_dir(self, table: str | None = None) -> Path:
        """The main dataset (table None) or the sibling dataset of another table."""
        return self.dataset if table is None else self.root / f"{self.name}.{table}"

    def partition_dirs(self, config_values: dict[str, object]) -> str:
        """'sweep_id=<name>/noc_traffic=uniform' for a point whose partition paths have these values."""
        parts = [f"sweep_id={segment_value(self.name)}"]
        parts += [f"{column_name(p)}={segment_value(config_values.get(p))}" for p in self.partition_by]
        return "/".join(parts)

    def point_file(self, point_id: str, config_values: dict[str, object], table: str | None = None) -> Path:
        return self.table_dir(table) / self.partition_dirs(config_values) / f"{point_id}.parquet"


def find_manifests(path: Path) -> list[Path]:
    """Manifests of the sweeps at ``path``: an --out directory, or one sweep's dataset directory."""
    path = Path(path)
    own = path.parent / f"{path.name}{MANIFEST_SUFFIX}"
    if own.is_file():
        return [own]
    if path.is_file() and path.name.endswith(MANIFEST_SUFFIX):
        return [path]
    return sorted(path.glob(f"*{MANIFEST_SUFFIX}")) if path.is_dir() else []

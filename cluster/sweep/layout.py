"""Where a sweep's files live: the hive-partitioned dataset, its sibling tables and the manifest.

    DIR/<name>/sweep_id=<name>/<key>=<value>/.../<point_id>.parquet     the points' result rows
    DIR/_<name>.<table>/sweep_id=<name>/<key>=<value>/.../<point_id>.parquet   other tables of a point
    DIR/_<name>.manifest.json                                           spec versions, runs, every point

A point's file name is its id, so a point computed twice (a retry after a node died)
lands on the same path and is replaced atomically: never two files for one point.
Only Parquet files live in the dataset directories, so every reader can scan them; and
everything else in DIR starts with ``_``, which pyarrow (and pandas through it) skip, so
``pyarrow.dataset.dataset(DIR)`` reads the result rows of every sweep in DIR and nothing
else. Sweeps written before this layout (``<name>.manifest.json``, ``<name>.<table>/``)
are still found and read.
"""

from __future__ import annotations

import math
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

NULL_SEGMENT = "__HIVE_DEFAULT_PARTITION__"  # what pyarrow, Spark and Hive call a null partition
MANIFEST_SUFFIX = ".manifest.json"
SIDE = "_"  # prefix of everything in an --out directory that is not a sweep's result rows


def column_name(path: str) -> str:
    """Dataset column of a swept config path: 'noc.rate' -> 'noc_rate'."""
    return path.replace("[", "_").replace("]", "").replace(".", "_")  # system.network[0].size: system_network_0_size


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
        return self.root / f"{SIDE}{self.name}{MANIFEST_SUFFIX}"

    @property
    def legacy_manifest(self) -> Path:
        """Where sweeps written before the ``_`` layout kept their manifest."""
        return self.root / f"{self.name}{MANIFEST_SUFFIX}"

    def table_dir(self, table: str | None = None) -> Path:
        """The main dataset (table None) or the sibling dataset of another table."""
        return self.dataset if table is None else self.root / f"{SIDE}{self.name}.{table}"

    def sibling_dirs(self) -> dict[str, Path]:
        """Every sibling table's directory (this layout's and the legacy one), by table name."""
        out = {}
        for prefix in (f"{self.name}.", f"{SIDE}{self.name}."):
            for d in sorted(self.root.glob(f"{prefix}*")):
                if d.is_dir():
                    out[d.name[len(prefix):]] = d
        return out

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
    for own in (path.parent / f"{SIDE}{path.name}{MANIFEST_SUFFIX}", path.parent / f"{path.name}{MANIFEST_SUFFIX}"):
        if own.is_file():
            return [own]
    if path.is_file() and path.name.endswith(MANIFEST_SUFFIX):
        return [path]
    if not path.is_dir():
        return []
    found = {m.name[len(SIDE):] if m.name.startswith(SIDE) else m.name: m
             for m in sorted(path.glob(f"*{MANIFEST_SUFFIX}"), key=lambda m: m.name.startswith(SIDE))}
    return sorted(found.values())  # a name in both layouts: the current one

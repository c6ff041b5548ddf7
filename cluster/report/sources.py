"""Finding the result tables in a directory: run outputs (``*.parquet`` named by table) and sweeps.

A table is named by its schema's ``table`` metadata (set by cluster.results.schemas), else by
its file name. A sweep is found by its manifest and read with its sibling tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cluster.sweep.dataset import read_dataset
from cluster.sweep.layout import DatasetLayout, column_name, find_manifests
from cluster.sweep.manifest import Manifest
from cluster.sweep.spec import flatten


@dataclass
class SweepTables:
    name: str
    command: str
    axes: list[str]  # swept columns
    result: pa.Table  # the points' result rows (errors included)
    tables: dict[str, pa.Table] = field(default_factory=dict)  # sibling tables by name
    orders: dict[str, list] = field(default_factory=dict)  # swept column -> its values in the spec's order


@dataclass
class Sources:
    runs: dict[str, pa.Table] = field(default_factory=dict)  # table name -> table, from run outputs
    sweeps: list[SweepTables] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.runs and not self.sweeps


def table_name(path: Path) -> str:
    meta = pq.read_schema(path).metadata or {}
    return meta.get(b"table", path.stem.encode()).decode()


def _sweep(manifest_path: Path) -> SweepTables | None:
    m = Manifest.load(manifest_path)
    root = manifest_path.parent
    if not (root / m.sweep).is_dir():
        return None
    siblings = {name: read_dataset(d) for name, d in DatasetLayout(root, m.sweep).sibling_dirs().items()}
    axes = flatten(m.spec.get("axes") or {}) if isinstance(m.spec.get("axes"), dict) else {}
    orders = {column_name(path): values for path, values in axes.items() if isinstance(values, list)}
    return SweepTables(m.sweep, m.command, list(m.columns), read_dataset(root / m.sweep), siblings, orders)


def discover(path: str | Path) -> Sources:
    path = Path(path)
    out = Sources()
    for f in sorted(path.glob("*.parquet")) if path.is_dir() else []:
        name = table_name(f)
        out.runs[name] = pa.concat_tables([out.runs[name], pq.read_table(f)]) if name in out.runs \
            else pq.read_table(f)
    out.sweeps = [s for m in find_manifests(path) if (s := _sweep(m)) is not None]
    return out

"""Where a sweep's files live: one Parquet dataset per table of its command, and the manifest.

    DIR/<name>/<table>/sweep_id=<name>/<key>=<value>/.../<point_id>.<table>.parquet   every table of a point
    DIR/_<name>.manifest.json                                                       spec versions, runs, points

The point's result rows are the command's result table (``noc_summary``, ``run_summary``,
``system_summary``, ``sweep_noop``); its other tables sit beside it, each its own dataset,
with the same paths (cluster/results/layout.py makes them). A point's file name is its id,
so a point computed twice (a retry after a node died) lands on the same path and is
replaced atomically: never two files for one point.

Sweeps written before this layout (manifest format 2 and older: the result rows in
DIR/<name>/ itself, the other tables in DIR/_<name>.<table>/ or DIR/<name>.<table>/) are
still found and read; they are not continued (``--replace`` starts them again).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cluster.results.layout import NULL_SEGMENT, segment_value, table_file  # noqa: F401 - re-exported
from cluster.sweep.manifest import FORMAT, Manifest

MANIFEST_SUFFIX = ".manifest.json"
SIDE = "_"  # prefix of the manifest beside the sweep's directory


def column_name(path: str) -> str:
    """Dataset column of a swept config path: 'noc.rate' -> 'noc_rate'."""
    return path.replace("[", "_").replace("]", "").replace(".", "_")  # system.network[0].size: system_network_0_size


@dataclass(frozen=True)
class DatasetLayout:
    root: Path  # the --out directory
    name: str  # the sweep name
    partition_by: tuple[str, ...] = ()  # dotted config paths
    result: str = "result"  # the command's result table
    format: int = FORMAT  # the manifest format the files were written in

    @property
    def dataset(self) -> Path:
        """The sweep's directory: its tables (older layouts: its result rows)."""
        return self.root / self.name

    @property
    def manifest(self) -> Path:
        return self.root / f"{SIDE}{self.name}{MANIFEST_SUFFIX}"

    @property
    def legacy_manifest(self) -> Path:
        """Where sweeps written before the ``_`` manifest kept theirs."""
        return self.root / f"{self.name}{MANIFEST_SUFFIX}"

    @property
    def legacy(self) -> bool:
        return self.format < FORMAT

    def table_dir(self, table: str | None = None) -> Path:
        """The dataset of ``table`` (None: the result table)."""
        if self.legacy:
            return self.dataset if table in (None, self.result) else self.root / f"{SIDE}{self.name}.{table}"
        return self.dataset / (table or self.result)

    def table_dirs(self) -> dict[str, Path]:
        """Every stored table's directory, the result table first."""
        if not self.legacy:
            found = {d.name: d for d in sorted(self.dataset.glob("*")) if d.is_dir()}
            return {**({self.result: found.pop(self.result)} if self.result in found else {}), **found}
        out = {self.result: self.dataset} if self.dataset.is_dir() else {}
        for prefix in (f"{self.name}.", f"{SIDE}{self.name}."):
            for d in sorted(self.root.glob(f"{prefix}*")):
                if d.is_dir():
                    out[d.name[len(prefix):]] = d
        return out

    def partitions(self, config_values: dict[str, object]) -> list[tuple[str, object]]:
        """[('sweep_id', name), ('noc_traffic', 'uniform'), ...] for a point with these partition values."""
        return [("sweep_id", self.name)] + [(column_name(p), config_values.get(p)) for p in self.partition_by]

    def point_file(self, point_id: str, config_values: dict[str, object], table: str | None = None) -> Path:
        """Where a point's ``table`` (None: its result) is written (this layout only: older ones are read)."""
        return table_file(self.dataset, table or self.result, self.partitions(config_values), point_id)


def of_manifest(path: Path) -> DatasetLayout:
    """The layout of the sweep whose manifest is at ``path`` (the files it was written in)."""
    m = Manifest.load(path)
    return DatasetLayout(path.parent, m.sweep, tuple(m.partition_by), m.result_table or _result_of(m.command), m.format)


def _result_of(command: str) -> str:
    from cluster.sweep.commands import COMMANDS

    return COMMANDS[command].result if command in COMMANDS else "result"


def point_of(file: Path) -> str:
    """The point id a stored file belongs to (``<point_id>.<table>.parquet``, older ``<point_id>.parquet``)."""
    return file.name.split(".", 1)[0]


def find_manifests(path: Path) -> list[Path]:
    """Manifests of the sweeps at ``path``: an --out directory, or one sweep's directory."""
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

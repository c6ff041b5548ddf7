"""Where a sweep's files live: one Parquet dataset per table of its command, and the manifest.

    DIR/<name>/<table>/sweep_id=<name>/<key>=<value>/.../<point_id>.<table>.parquet   every table of a point
    DIR/<name>/<table>/sweep_id=<name>/<key>=<value>/.../compact-<id>.<table>.parquet  many points (compacted)
    DIR/_<name>.manifest.json                                                       spec versions, runs, points
    DIR/_<name>.lock                                                                held while it runs or compacts

The point's result rows are the command's result table (``noc_summary``, ``run_summary``,
``system_summary``, ``sweep_noop``); its other tables sit beside it, each its own dataset,
with the same paths (cluster/results/layout.py makes them). A point's file name is its id,
so a point computed twice (a retry after a node died) lands on the same path and is
replaced atomically: never two files for one point. Compaction (compact.py) rewrites the
point files of a partition directory into ``compact-<id>`` files of up to 10^5 rows each,
beside them, and a point's rows are then in exactly one of them.

Sweeps written before this layout (manifest format 2 and older: the result rows in
DIR/<name>/ itself, the other tables in DIR/_<name>.<table>/ or DIR/<name>.<table>/) are
still found and read; they are not continued (``--replace`` starts them again).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cluster.results.layout import COMPACTED, NULL_SEGMENT, STAGED, is_compacted, point_of, segment_value, table_file  # noqa: F401 - re-exported
from cluster.sweep.manifest import FORMAT, read_json

MANIFEST_SUFFIX = ".manifest.json"
LOCK_SUFFIX = ".lock"
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
    def lock(self) -> Path:
        return self.root / f"{SIDE}{self.name}{LOCK_SUFFIX}"

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
    """The layout of the sweep whose manifest is at ``path`` (the files it was written in). Read from the
    manifest's JSON without building its point records (10^5 of them take seconds)."""
    m = read_json(path)
    return DatasetLayout(path.parent, m["sweep"], tuple(m["partition_by"]),
                         m.get("result_table") or _result_of(m["command"]), m.get("format", FORMAT))


def _result_of(command: str) -> str:
    from cluster.sweep.commands import COMMANDS

    return COMMANDS[command].result if command in COMMANDS else "result"


def staged_path(final: Path) -> Path:
    """Where a compacted file waits, complete, until the files it replaces are gone (hidden from every reader)."""
    return final.with_name(f".{final.name}{STAGED}")


def final_path(staged: Path) -> Path:
    return staged.with_name(staged.name[1:-len(STAGED)])


def dataset_files(table_dir: Path) -> list[Path]:
    """The visible Parquet files of one table's dataset (point files and compacted files), sorted."""
    return sorted(f for f in table_dir.rglob("*.parquet") if not f.name.startswith((".", "_"))) \
        if table_dir.is_dir() else []


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

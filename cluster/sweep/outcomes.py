"""What became of a sweep's points: completed, deadlocked, cut off, failed, or an error row.

A point stored ``ok`` ran its job; whether the simulated run itself completed is its result's
``status`` column (``rdasim run`` and systems: completed, deadlocked, cut_off, failed; a NoC
point has none and counts as completed). A point whose job raised is an error row. One
description of the outcomes, read by ``rdasim sweep`` (its end-of-run counts and exit
status), ``rdasim sweep status`` and the figures (which never draw a run that did not
complete as a value).
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

COMPLETED, DEADLOCKED, CUT_OFF, FAILED, ERROR = "completed", "deadlocked", "cut_off", "failed", "error"
OUTCOMES = (COMPLETED, DEADLOCKED, CUT_OFF, FAILED, ERROR)  # the order they are listed in
WORDS = {COMPLETED: "completed", DEADLOCKED: "deadlocked", CUT_OFF: "cut off", FAILED: "failed",
         ERROR: "error rows"}
INCOMPLETE = {DEADLOCKED, CUT_OFF, FAILED}  # runs that stopped with their workload unfinished


def outcome_of(point_status: str | None, status: str | None) -> str:
    """The outcome of one stored row: its point_status ('ok' or 'error') and its result's status column."""
    if point_status != "ok":
        return ERROR
    return status if status in INCOMPLETE else COMPLETED


def row_outcome(row: dict) -> str:
    return outcome_of(row.get("point_status", "ok"), row.get("status"))


@dataclass(frozen=True)
class Outcomes:
    """Counts of a sweep's stored points by outcome, and which points each holds (by index)."""

    counts: dict[str, int] = field(default_factory=dict)
    points: dict[str, list[int]] = field(default_factory=dict)

    @property
    def incomplete(self) -> int:
        """Points stored that did not complete: deadlocked, cut off, failed or error rows."""
        return sum(n for k, n in self.counts.items() if k != COMPLETED)

    def line(self) -> str:
        """'40 completed, 12 deadlocked, 8 cut off, 0 failed, 0 error rows'."""
        return ", ".join(f"{self.counts.get(k, 0)} {WORDS[k]}" for k in OUTCOMES)

    def to_json(self) -> dict:
        return {k: self.counts.get(k, 0) for k in OUTCOMES}

    def listing(self) -> list[str]:
        """One line per outcome that has points: 'deadlocked: points 0-3, 72-75'."""
        return [f"{WORDS[k]}: point{'s' if len(self.points[k]) > 1 else ''} {ranges(self.points[k])}"
                for k in OUTCOMES if self.points.get(k)]


def ranges(indices: list[int]) -> str:
    """'0-3, 7, 9-10' for [0, 1, 2, 3, 7, 9, 10]."""
    out: list[list[int]] = []
    for i in sorted(indices):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def outcomes(table: pa.Table, index_of: dict[str, int] | None = None) -> Outcomes:
    """Outcomes of the rows of a result table (one row per point; a point with several rows counts once,
    by its worst row). ``index_of``: point id -> its index: only these points count (a file of no point of the
    sweep is not one of its outcomes)."""
    return _outcomes_of(_columns(table), index_of)


COLUMNS = ("point_id", "point_index", "point_status", "status")  # all an outcome needs of a row


def _columns(table: pa.Table) -> dict[str, list]:
    """A table's outcome columns as Python lists (a column it lacks is all None)."""
    return {c: table[c].to_pylist() if c in table.column_names else [None] * table.num_rows for c in COLUMNS}


def _outcomes_of(cols: dict[str, list], index_of: dict[str, int] | None) -> Outcomes:
    worst: dict[str, tuple[int, int | None]] = {}  # point id -> (rank of its worst outcome, index)
    for pid, index, ps, st in zip(cols["point_id"], cols["point_index"], cols["point_status"], cols["status"]):
        if index_of is not None and pid not in index_of:
            continue
        rank = OUTCOMES.index(outcome_of(ps if ps is not None else "ok", st))
        i = index_of[pid] if index_of is not None else index
        if pid not in worst or rank > worst[pid][0]:
            worst[pid] = (rank, i)
    counts = Counter(OUTCOMES[rank] for rank, _ in worst.values())
    points: dict[str, list[int]] = {}
    for rank, i in sorted(worst.values(), key=lambda v: (v[0], v[1] if v[1] is not None else -1)):
        points.setdefault(OUTCOMES[rank], []).append(i if i is not None else -1)
    return Outcomes(dict(counts), points)


def read_outcomes(result_dir: Path, index_of: dict[str, int] | None = None) -> Outcomes:
    """The outcomes of the points stored in a sweep's result dataset: point files, compacted files and staged
    ones (index.py), only the columns they need, a few files at once. A file that cannot be read is no point's
    outcome: its point is pending, as `rdasim sweep status` counts it."""
    from cluster.sweep.index import THREADS, staged_files
    from cluster.sweep.layout import dataset_files

    def read(f: Path) -> dict[str, list] | None:
        # the four columns as lists, not the file's Table: 10^5 point files' Tables each keep their
        # schema and metadata, about 6 KB apiece (a 10^5-point sweep's driver peaked at 1.1 GiB)
        try:
            with pq.ParquetFile(f) as opened:
                return _columns(opened.read(columns=[c for c in COLUMNS if c in opened.schema_arrow.names]))
        except (OSError, pa.ArrowInvalid):
            return None

    files = dataset_files(result_dir) + staged_files(result_dir)
    cols: dict[str, list] = {c: [] for c in COLUMNS}
    with ThreadPoolExecutor(THREADS) as pool:
        for part in pool.map(read, files):
            if part is not None:
                for c in COLUMNS:
                    cols[c].extend(part[c])
    return _outcomes_of(cols, index_of)

"""How far a sweep has got: done, failed and pending points, read from the stored files.

The files are the truth (the manifest can lag behind a killed driver), so the result
table's files are read (index.py: point files and compacted files); the manifest says
which points there are.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from cluster.errors import UserError
from cluster.sweep.compact import finish_interrupted
from cluster.sweep.index import holdings
from cluster.sweep.layout import find_manifests, of_manifest
from cluster.sweep.manifest import Manifest
from cluster.sweep.outcomes import OUTCOMES, read_outcomes
from cluster.sweep.rebuild import restore
from cluster.sweep.records import STATUS_OK


@dataclass(frozen=True)
class SweepStatus:
    sweep: str
    command: str
    total: int
    done: int
    failed: int
    pending: int
    state: str  # running, finished, interrupted, never run
    started: str | None
    ended: str | None
    runs: int
    dataset: str
    errors: list[str]  # the first failed points' messages
    specs: int = 1  # spec versions the sweep holds points of (more than one after --add)
    stray: int = 0  # files in the dataset that belong to no point of the manifest (not counted above)
    code: list[str] = field(default_factory=list)  # code versions that computed its points
    outcomes: dict[str, int] = field(default_factory=dict)  # stored points by outcome: completed, deadlocked, ...
    points: dict[str, list[int]] = field(default_factory=dict)  # the points' indices by outcome
    unreadable: list[str] = field(default_factory=list)  # point files that cannot be read (counted as pending)
    finished: int = 0  # files of an interrupted compaction this status put in place first
    rebuilt: str = ""  # the manifest was lost and this status rebuilt it from the stored files: what it did

    def to_json(self) -> dict:
        return asdict(self)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return True


def _state(m: Manifest) -> str:
    if not m.runs:
        return "never run"
    last = m.runs[-1]
    if last.state == "running" and last.host == socket.gethostname() and not _alive(last.pid):
        return "interrupted"  # the driver died without saying so
    return last.state


def sweep_status(manifest_path: Path, max_errors: int = 5) -> SweepStatus:
    m = Manifest.load(manifest_path)
    finished = finish_interrupted(of_manifest(manifest_path))  # readers never see its gap
    root = manifest_path.parent
    found_files = holdings(of_manifest(manifest_path).table_dir())
    held = found_files.status
    done = failed = 0
    errors: list[str] = []
    for pid, entry in m.points.items():
        found = held.get(pid)
        if found is None:
            continue
        if found == STATUS_OK:
            done += 1
        else:
            failed += 1
            if len(errors) < max_errors:
                errors.append(f"point {entry.index}: {entry.error or 'failed'}")
    total = len(m.points)
    index_of = {pid: entry.index for pid, entry in m.points.items()}
    outcomes = read_outcomes(of_manifest(manifest_path).table_dir(), index_of)
    return SweepStatus(m.sweep, m.command, total, done, failed, total - done - failed, _state(m),
                       m.runs[0].started if m.runs else None, m.runs[-1].ended if m.runs else None,
                       len(m.runs), str(root / m.sweep), errors, max(len(m.specs), 1), len(set(held) - set(m.points)),
                       m.code_labels(), {k: outcomes.counts.get(k, 0) for k in OUTCOMES}, outcomes.points,
                       [str(f) for f in found_files.unreadable], finished)


def statuses(path: str | Path) -> list[SweepStatus]:
    """Every sweep at ``path``; a sweep whose manifest was lost has it rebuilt from its files first."""
    rebuilt = restore(Path(path))
    found = find_manifests(Path(path))
    if not found:
        raise UserError(f"no sweep at {str(path)!r}: expected an --out directory holding _<name>.manifest.json "
                        "or a sweep's dataset directory")
    return [replace(s, rebuilt=rebuilt.get(s.sweep, "")) for s in map(sweep_status, found)]

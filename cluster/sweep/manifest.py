"""The sweep manifest: its spec, each run's start and end, and every point's status (JSON, atomic).

The manifest is a summary for people and for ``rdasim sweep status``; the truth about a
point is its file (written atomically), so a manifest that lags behind a killed driver
loses nothing: the next run and ``status`` re-read the files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from cluster.errors import UserError
from cluster.results import io

FORMAT = 3  # 2: spec versions, code versions, the "_" layout; 3: one dataset per table (sweep/layout.py)
PENDING, DONE, FAILED = "pending", "done", "failed"
INDENTED_POINTS = 10_000


REQUIRED = {"sweep": str, "command": str, "partition_by": list, "runs": list, "points": dict}  # a reader needs them


class ManifestError(UserError):
    """A manifest that cannot be read (corrupted, cut short, edited by hand): named, never a traceback."""


def unreadable(path: Path, what: str) -> ManifestError:
    return ManifestError(f"{path}: not a readable sweep manifest ({what}); the point files are the truth: move it "
                         "aside and rerun the sweep's spec to rebuild it from them")


def read_json(path: Path) -> dict:
    """A manifest's JSON, checked for the keys a reader needs (ManifestError naming the file if not)."""
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise unreadable(path, f"not UTF-8 text at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise unreadable(path, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except OSError as exc:
        raise unreadable(path, exc.strerror or str(exc)) from None
    if not isinstance(data, dict):
        raise unreadable(path, f"a JSON {type(data).__name__}, not an object")
    for key, kind in REQUIRED.items():
        if not isinstance(data.get(key), kind):
            raise unreadable(path, f"{key!r} is {'missing' if key not in data else type(data[key]).__name__}, "
                                   f"expected a {kind.__name__}")
    return data


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class PointEntry:
    index: int
    values: dict  # the swept paths this point sets
    file: str  # relative to the --out directory
    status: str = PENDING
    attempts: int = 0
    seconds: float | None = None
    error: str | None = None
    specs: list[str] = field(default_factory=list)  # hashes of the spec versions that list this point


@dataclass
class RunEntry:
    started: str
    host: str
    pid: int
    address: str | None
    rdasim_version: str
    to_run: int = 0
    skipped: int = 0
    computed: int = 0  # points that finished in this run (ok or error)
    failed: int = 0
    ended: str | None = None
    state: str = "running"  # running, finished, interrupted
    spec_hash: str = ""  # the spec version this run ran
    code: dict = field(default_factory=dict)  # cluster.version.CodeVersion of the driver
    code_label: str = ""  # e.g. 0.1.0+g1a2b3c4d5e6f.dirty.0123456789ab


@dataclass
class Manifest:
    sweep: str
    command: str
    description: str
    spec: dict
    spec_path: str
    partition_by: list[str]
    columns: dict[str, str]  # swept column -> Arrow type
    created: str
    runs: list[RunEntry] = field(default_factory=list)
    points: dict[str, PointEntry] = field(default_factory=dict)
    format: int = FORMAT
    specs: list[dict] = field(default_factory=list)  # every spec version: hash, text, base, added
    result_table: str = ""  # the table of the points' result rows (format 3)
    column_docs: dict[str, str] = field(default_factory=dict)  # what each result column means (once, not per file)

    def spec_hashes(self) -> list[str]:
        return [v["hash"] for v in self.specs]

    def code_labels(self) -> list[str]:
        """The code versions of the runs that stored points, oldest first."""
        out = []
        for r in self.runs:
            if r.computed and r.code_label and r.code_label not in out:
                out.append(r.code_label)
        return out

    def counts(self) -> dict[str, int]:
        out = {DONE: 0, FAILED: 0, PENDING: 0}
        for p in self.points.values():
            out[p.status] += 1
        return out

    def to_json(self) -> dict:
        """The manifest as JSON values: its records' own dicts, not deep copies (10^5 points: 0.2 s, not 5)."""
        return {**vars(self), "runs": [vars(r) for r in self.runs],
                "points": {k: vars(v) for k, v in self.points.items()}}

    def save(self, path: Path) -> None:
        # indented for people up to 10,000 points; beyond, compact (json's C encoder: 3x faster, 1/3 smaller)
        indent = 2 if len(self.points) <= INDENTED_POINTS else None
        io.write_text(json.dumps(self.to_json(), indent=indent, sort_keys=True, default=str) + "\n", path)

    @classmethod
    def load(cls, path: Path) -> "Manifest":
        data = read_json(path)
        try:
            data["runs"] = [RunEntry(**r) for r in data.get("runs", [])]
            data["points"] = {k: PointEntry(**v) for k, v in data.get("points", {}).items()}
            return cls(**data)
        except (TypeError, AttributeError) as exc:  # a field of the wrong type, or one it does not have
            raise unreadable(Path(path), str(exc)) from None

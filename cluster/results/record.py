"""The one record every command makes of a config: its identity and outcome, its figures, its
Arrow tables by name and its side files, whatever it simulated or solved.

``rdasim noc``, ``run`` (one chip or a system) and ``map`` each make a ``Result``; the CLI
prints it, ``Result.write`` puts it in a run's --out (through writer.py), a sweep stores its tables, and a
notebook reads it (``rdasim.run(...)``). The run's identity is the ``Summary``'s: the same
run id, config hash, seed and code every row of its tables carries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cluster.errors import EXIT_STATUS
from cluster.results import layout, writer
from cluster.version import CodeVersion

if TYPE_CHECKING:
    from cluster.parallel.simulate import Simulation


@dataclass(frozen=True)
class Summary(Mapping[str, Any]):
    """A run's identity and outcome as attributes, its figures as items (``summary["tokens"]``).

    ``status`` is the outcome the exit status follows (cluster/errors.py ``EXIT_STATUS``):
    a run completed, deadlocked, was cut off or failed; a NoC curve completed or was
    interrupted; a mapping is optimal, feasible, infeasible or unusable. The figures are the
    command's own (``rdasim run --json``'s and more; a NoC curve's: one dict per offered load
    under ``loads``)."""

    command: str  # noc, run, system or map
    run_id: str
    config_hash: str
    seed: int
    code: CodeVersion  # which code ran (version, git commit, dirty flag)
    status: str
    status_detail: str
    figures: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.figures[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.figures)

    def __len__(self) -> int:
        return len(self.figures)

    def identity(self) -> dict[str, Any]:
        """What run.json says of the run besides its config and figures."""
        return {"command": self.command, "run_id": self.run_id, "config_hash": self.config_hash, "seed": self.seed,
                "status": self.status, "status_detail": self.status_detail, "rdasim_version": self.code.version,
                "rdasim_commit": self.code.commit, "rdasim_dirty": self.code.dirty}


@dataclass
class Result:
    """One command's result: ``summary``, ``tables`` (Arrow, by table name; cluster/results/schemas.py),
    ``files`` (side files by name: text, or a JSON-ready object) and the resolved ``config``.
    ``simulations``: how each simulation ran (its shards, epochs, backend; none for a mapping)."""

    summary: Summary
    tables: dict[str, pa.Table]
    config: dict
    files: dict[str, Any] = field(default_factory=dict)
    simulations: list[Simulation] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.summary.status

    @property
    def exit_status(self) -> int:
        """The command line's exit status for this outcome."""
        return EXIT_STATUS[self.status]

    def record(self) -> dict[str, Any]:
        """run.json: the identity, the resolved config and the figures."""
        return {**self.summary.identity(), "config": self.config, "summary": dict(self.summary.figures)}

    def write(self, out: str | Path | layout.RunOutput, existing: str = "refuse", skip: Iterable[str] = ()
              ) -> list[Path]:
        """Write the tables, side files (but those in ``skip``) and run.json into directory ``out``
        (docs/results.md), through the one writer; a directory holding another run's tables is
        refused unless ``existing`` is "add" (runs accumulate) or "replace" (they are deleted
        first). Returns the files written."""
        if not isinstance(out, layout.RunOutput):
            out = layout.prepare(out, existing)
        skipped = set(skip)
        files = {name: content for name, content in self.files.items() if name not in skipped}
        return writer.write_run(out, self.summary.run_id, self.tables, files, self.record())

    def write_side(self, out: str | Path | layout.RunOutput, names: Iterable[str]) -> list[Path]:
        """The side files ``names`` in ``out`` (a run's --out, or the directory a file is asked in)."""
        return writer.write_side(out, self.summary.run_id, {name: self.files[name] for name in names})

    def __repr__(self) -> str:
        tables = ", ".join(f"{name} ({t.num_rows} rows)" for name, t in self.tables.items())
        return f"<Result {self.summary.command} {self.summary.run_id}: {self.status}; tables {tables}>"

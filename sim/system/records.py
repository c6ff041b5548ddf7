"""What a system run records (a light module: cluster/results/schemas.py derives table columns from it)."""

from __future__ import annotations

from dataclasses import astuple, dataclass

from sim.chip.records import column


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A span of a chip's program: a micro-batch stage, a collective, ... (a row of system_steps)."""

    kind: str = column("string", "what the step was")
    chip: int = column("int64", "chip")
    ident: int = column("int64", "which one (repetition, stage)")
    start: int = column("int64", "cycle it started")
    end: int = column("int64", "cycle it ended")
    nbytes: int = column("int64", "bytes it moved, or micro-batches it ran")

    def row(self) -> tuple:
        return astuple(self)

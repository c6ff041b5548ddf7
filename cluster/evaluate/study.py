"""What a study is: a sweep's points over a base config, and how its rows answer the question."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

Row = dict[str, Any]  # one run_summary row of the study's sweep


@dataclass(frozen=True)
class Check:
    """One reference a study's figure is held to: a closed form, a published figure or the toy's known result."""

    what: str  # the claim, in words
    figure: str  # rdasim's figure, as printed
    reference: str  # what it is held to, with its source
    holds: bool
    run_ids: tuple[str, ...] = ()  # the runs the figure comes from


@dataclass(frozen=True)
class Column:
    """A table column: its header, the run_summary field (or a function of the row) and its format."""

    header: str
    value: Callable[[Row], Any]
    fmt: str = "{:.4g}"

    def render(self, row: Row) -> str:
        v = self.value(row)
        if v is None:
            return "-"
        if isinstance(v, str):
            return v
        try:
            return self.fmt.format(v)
        except (ValueError, TypeError):
            return str(v)


def col(header: str, name: str, fmt: str = "{:.4g}") -> Column:
    """A column showing run_summary field ``name``."""
    return Column(header, lambda r: r.get(name), fmt)


class Judge(Protocol):
    def __call__(self, rows: list[Row]) -> list[Check]: ...


class Draw(Protocol):
    def __call__(self, rows: list[Row], plt) -> Any: ...


@dataclass(frozen=True)
class Study:
    """One question of the evaluation, answered by one sweep (``name`` is the sweep's name).

    ``points(quick)`` lists the sweep's explicit points (dotted config path -> value, over
    ``base``, an example file); ``case(row)`` labels a row for the table; ``judge`` holds the
    rows to their references; ``draw`` makes the study's figure."""

    name: str
    title: str
    question: str
    scale: str  # where it runs, and if at toy scale, why
    base: str  # an examples/ file
    points: Callable[[bool], list[dict[str, Any]]]
    case: Callable[[Row], str]
    columns: tuple[Column, ...]
    judge: Judge
    draw: Draw
    notes: tuple[str, ...] = field(default_factory=tuple)
    runner: Callable[..., Any] | None = None  # a study that is not a plain sweep (the optimiser's); None: run_study

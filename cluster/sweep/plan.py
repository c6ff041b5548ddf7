"""From a spec file to a checked plan: every point resolved, every problem in the spec listed at once."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from cluster import schemas
from cluster.config import ConfigError, Issue
from cluster.errors import UserError
from cluster.sweep import commands
from cluster.sweep.layout import column_name
from cluster.sweep.points import Point, expand
from cluster.sweep.records import AxisColumns
from cluster.sweep.spec import SweepSpec, read_spec

PUBLIC_COMMANDS = ("noc", "run")  # noop exists too, for tests and benchmarks


@dataclass(frozen=True)
class SweepPlan:
    spec: SweepSpec
    command: commands.Command
    points: list[Point]
    axes: AxisColumns
    duplicates: int  # combinations that resolved to an already listed config


def _command(spec: SweepSpec, issues: list[Issue]):
    if spec.command not in commands.COMMANDS:
        close = difflib.get_close_matches(spec.command, PUBLIC_COMMANDS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        issues.append(Issue("sweep.command", f"{spec.command!r} is not one of {', '.join(PUBLIC_COMMANDS)}{hint}"))
        return None, None
    command = commands.get(spec.command)
    try:
        return command, command.schema()
    except UserError as exc:
        issues.append(Issue("sweep.command", exc.message))
        return None, None


def _collisions(paths: list[str], command: commands.Command) -> list[Issue]:
    reserved = {c.name for c in schemas.SWEEP_COLUMNS}
    result = command.result_schema()
    taken = set(result.names) if result is not None else set()
    issues, seen = [], {}
    for path in paths:
        name = column_name(path)
        if name in seen:
            issues.append(Issue(path, f"its column name {name!r} is also that of {seen[name]!r}"))
        elif name in reserved or name in taken:
            issues.append(Issue(path, f"its column name {name!r} is already a column of the results"))
        seen[name] = path
    return issues


def plan_from_spec(spec: SweepSpec, issues: list[Issue] | None = None) -> SweepPlan:
    """Expand a parsed spec; raise ConfigError with the parse ``issues`` and every new one."""
    issues = list(issues or [])
    command, schema = None, None
    if spec.command:
        command, schema = _command(spec, issues)
    points, duplicates = [], 0
    if command is not None:
        points, found, duplicates = expand(spec, schema)
        issues += found + _collisions(spec.swept_paths(), command)
    if issues:
        raise ConfigError(spec.source or "sweep spec", issues)
    axes = AxisColumns.of(spec.swept_paths(), [p.config for p in points])
    return SweepPlan(spec, command, points, axes, duplicates)


def plan_sweep(path: str | Path) -> SweepPlan:
    """Read, check and expand a spec file; raise ConfigError listing every problem."""
    spec, issues = read_spec(path)
    return plan_from_spec(spec, issues)

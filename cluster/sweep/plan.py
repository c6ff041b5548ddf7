"""From a spec file to a checked plan: every point resolved, every problem in the spec listed at once."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from cluster.config import ConfigError, Issue, Table, config_hash, footprint
from cluster.config.identity import ConfigIdentity
from cluster.config.schema import get_path
from cluster.errors import UserError
from cluster.results import schemas
from cluster.sweep import commands, legacy
from cluster.sweep.layout import column_name
from cluster.sweep.points import Point, Skipped, expand
from cluster.sweep.spec import EXECUTION_KEYS, SweepSpec, read_spec


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def infer_type(values: list) -> pa.DataType:
    """Arrow type of a swept column from its resolved values: numbers stay numbers."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.bool_()
    if present and all(_is_int(v) for v in present):
        return pa.int64()
    if present and all(_is_int(v) or isinstance(v, float) for v in present):
        return pa.float64()
    return pa.string()  # strings, and tables or lists (as JSON)


def encode(value, typ: pa.DataType):
    """A resolved config value as stored in a swept column of type ``typ``."""
    if value is None:
        return None
    if typ == pa.float64():
        return float(value)  # an int among floats
    if typ == pa.string() and not isinstance(value, str):
        return json.dumps(value, sort_keys=True, default=str)  # a table, a list, or mixed types
    return value


@dataclass(frozen=True)
class AxisColumns:
    """The swept config paths as typed dataset columns."""

    paths: tuple[str, ...]
    types: tuple[pa.DataType, ...]

    @classmethod
    def of(cls, paths: list[str], configs: list[dict]) -> "AxisColumns":
        return cls(tuple(paths), tuple(infer_type([get_path(c, p) for c in configs]) for p in paths))

    @property
    def fields(self) -> list[pa.Field]:
        return [pa.field(column_name(p), t) for p, t in zip(self.paths, self.types)]

    def values(self, config: dict) -> list:
        return [encode(get_path(config, p), t) for p, t in zip(self.paths, self.types)]


@dataclass(frozen=True)
class SweepPlan:
    spec: SweepSpec
    command: commands.Command
    points: list[Point]
    axes: AxisColumns
    duplicates: int  # combinations that resolved to an already listed config
    spec_hash: str = ""  # what the spec asks for (base resolved), without how it runs
    skipped: Skipped | None = None  # combinations left out as invalid together (sweep.skip_invalid)
    notes: tuple[str, ...] = ()  # what a user should know before the points run (``notes``)
    legacy_spec_hash: str = ""  # the spec version's hash by the rule before spec_hash's (legacy.py)


def spec_hash(spec: SweepSpec, identity: ConfigIdentity) -> str:
    """Hash of what a spec asks for: its command, axes, zips, random draws and points, and the base config
    it resolves (a base file's content, not its name), each file a file key names by its content
    (cluster/config/identity.py), so the same spec from another clone is the same version; retries,
    concurrency, the description and how points are stored left out."""
    sweep = {k: v for k, v in (spec.raw.get("sweep") or {}).items() if k not in EXECUTION_KEYS}
    axes = {p: [identity.set_at(p, v) for v in values] for p, values in spec.axes.items()}
    zips = [{p: [identity.set_at(p, v) for v in values] for p, values in z.items()} for z in spec.zips]
    points = [{p: identity.set_at(p, v) for p, v in point.items()} for point in spec.points]
    return config_hash({"sweep": sweep, "axes": axes, "zip": zips, "random": spec.raw.get("random"),
                        "points": points, "base": identity.given(spec.base)})


def _command(spec: SweepSpec, issues: list[Issue]) -> tuple[commands.Command, Table] | None:
    """The spec's command and its config schema; None (and an issue) if it names none."""
    if spec.command not in commands.COMMANDS:
        close = difflib.get_close_matches(spec.command, list(commands.COMMANDS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        issues.append(Issue("sweep.command", f"{spec.command!r} is not one of {commands.known()}{hint}"))
        return None
    command = commands.get(spec.command)
    return command, command.schema()


def column_collisions(paths: list[str], command: commands.Command, extra: tuple[str, ...] = ()) -> list[Issue]:
    """Swept paths whose column names clash with each other, the sweep's columns (and ``extra``) or the result's."""
    reserved = {c.name for c in schemas.SWEEP_COLUMNS} | set(extra)
    result = command.result_schema()
    taken = set(result.names) if result is not None else set()
    issues: list[Issue] = []
    seen: dict[str, str] = {}  # column name -> the path that took it
    for path in paths:
        name = column_name(path)
        if name in seen:
            issues.append(Issue(path, f"its column name {name!r} is also that of {seen[name]!r}"))
        elif name in reserved or name in taken:
            issues.append(Issue(path, f"its column name {name!r} is already a column of the results"))
        seen[name] = path
    return issues


def _too_many(spec: SweepSpec) -> Issue | None:
    """An issue if the spec's combinations would not fit in memory, keyed by the largest dimension."""
    dims = {f"axes.{p}": len(v) for p, v in spec.axes.items()}
    dims.update({f"zip[{i}]": len(next(iter(z.values()))) for i, z in enumerate(spec.zips) if z})
    if spec.random is not None:
        dims["random.samples"] = spec.random.samples
    total = math.prod(dims.values()) + len(spec.points) if dims else len(spec.points)
    found = footprint.points_problem(total)
    return Issue(max(dims, key=lambda k: dims[k]) if dims else "points", found) if found else None


def plan_from_spec(spec: SweepSpec, issues: list[Issue] | None = None) -> SweepPlan:
    """Expand a parsed spec; raise ConfigError with the parse ``issues`` and every new one."""
    issues = list(issues or [])
    resolved = _command(spec, issues) if spec.command else None
    points: list[Point] = []
    duplicates, skipped, identity = 0, None, None
    too_many = _too_many(spec)
    if too_many is not None:  # before a point is drawn: samples = 10**12 is refused, not allocated
        issues.append(too_many)
    elif resolved is not None:
        command, schema = resolved
        identity = ConfigIdentity(schema)  # shared: each file the spec names is read once
        points, found, duplicates, skipped = expand(spec, schema, identity)
        issues += found + column_collisions(spec.swept_paths(), command)
    if issues or resolved is None:  # reading a spec reports a missing command; a spec built in code may not
        raise ConfigError(spec.source or "sweep spec",
                          issues or [Issue("sweep.command", "is required: what each point runs (noc or run)")])
    command = resolved[0]
    assert identity is not None  # a resolved command with no issue was expanded
    axes = AxisColumns.of(spec.swept_paths(), [p.config for p in points])
    return SweepPlan(spec, command, points, axes, duplicates, spec_hash(spec, identity), skipped,
                     notes(spec, points, skipped), legacy.spec_hash(spec))


def _replayed_traces(config: dict) -> list[str]:
    """The workload keys of ``config`` that replay a recorded trace (workload.<section>.trace set)."""
    workload = config.get("workload") or {}
    return [f"workload.{k}.trace" for k, v in workload.items() if isinstance(v, dict) and v.get("trace")]


def notes(spec: SweepSpec, points: list[Point], skipped: Skipped | None) -> tuple[str, ...]:
    """What a user should know before the points run: combinations skipped as invalid together, and
    seeds swept over a trace replay (a trace fixes arrivals and lengths: the seeds may change nothing)."""
    out = [skipped.line()] if skipped else []
    seeds = [p for p in spec.set_paths() if p.split(".")[-1] == "seed" or p.endswith("_seed")]
    for path in seeds:
        values = {repr(get_path(p.config, path)) for p in points}
        traces = sorted({t for p in points for t in _replayed_traces(p.config)})
        if len(values) > 1 and traces:
            out.append(f"warning: {path} takes {len(values)} values but {', '.join(traces)} replays a trace: a seed "
                       "only changes what the trace does not fix (its arrivals, prompts and outputs come from the "
                       "trace), so the seeds' points may be identical")
    return tuple(out)


def plan_sweep(given: str | Path | Mapping[str, Any]) -> SweepPlan:
    """Read (a file, TOML text or a dict: cluster/config/source.py), check and expand a spec; raise
    ConfigError listing every problem."""
    spec, issues = read_spec(given)
    return plan_from_spec(spec, issues)


def check_points(plan: SweepPlan) -> None:
    """Run the command's own checks (those its job runs before simulating) on every point; raise
    UserError listing each problem once with the points it affects. What `--dry-run` adds to the
    schema checks: a real run would turn these points into error rows."""
    found: dict[str, list[int]] = {}
    for p in plan.points:
        try:
            plan.command.check(p.config)
        except UserError as exc:
            for line in exc.details or [exc.message]:
                found.setdefault(line, []).append(p.index)
        except ValueError as exc:
            found.setdefault(str(exc), []).append(p.index)
    if found:
        lines = [f"{what} ({'point' if len(idx) == 1 else 'points'} {', '.join(map(str, idx[:8]))}"
                 f"{f' and {len(idx) - 8} more' if len(idx) > 8 else ''})" for what, idx in found.items()]
        n = len({i for idx in found.values() for i in idx})
        raise UserError(f"{plan.spec.source or 'sweep spec'}: {n} of {len(plan.points)} points would fail "
                        "(a run would store them as error rows)", lines)

"""Expanding a sweep spec into points: each a fully resolved, validated config with a stable id.

The generated points are the cartesian product of the grid axes, the zipped groups and
the random draws (each one dimension), in spec order with the last dimension varying
fastest; explicit points follow. A point's id is the hash of what its resolved config asks
for (cluster/config/identity.py): every key at its schema default left out and every file
by its content, so the same config gets the same id in any spec, from any clone, and after a
commit that adds a config key with a default that keeps the old behaviour, and reruns find
their finished points; a trace changed under the same name is a new point. (Sweeps stored
before this rule, whose ids hashed the whole config, are still resumed: known.py.)
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass

import numpy as np

from cluster.config import Issue, OpenTable, Table
from cluster.config.identity import ConfigIdentity
from cluster.config.loader import apply_overrides
from cluster.config.schema import TableList, all_paths, get_path, validate
from cluster.sweep.spec import RandomAxes, SweepSpec

SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class Point:
    index: int  # position in the expansion
    id: str  # what the resolved config asks for, hashed (cluster/config/identity.py)
    values: dict[str, object]  # dotted path -> value this point sets (as written in the spec)
    config: dict  # the fully resolved config


def path_problem(schema: Table, path: str) -> str | None:
    """Why ``path`` is not a key of ``schema`` (with a did-you-mean), or None if it is."""
    node = schema
    parts = path.split(".")
    for i, part in enumerate(parts):
        if isinstance(node, OpenTable):
            return None
        if not isinstance(node, Table):
            return f"'{'.'.join(parts[:i])}' is a value, not a table"
        item = re.match(r"^(.+)\[\d+\]$", part)  # key[i]: a table of an array of tables
        if item and isinstance(node.fields.get(item.group(1)), TableList):
            node = node.fields[item.group(1)].table
            continue
        if part not in node.fields:
            close = difflib.get_close_matches(path, all_paths(schema), n=1, cutoff=0.6)
            return "not a config key" + (f"; did you mean '{close[0]}'?" if close else "")
        node = node.fields[part]
    return None


def draws(rnd: RandomAxes) -> list[dict[str, object]]:
    """The random points: draw i is the same for any ``samples`` >= i + 1 (a prefix property)."""
    rng = np.random.default_rng(rnd.seed)
    out = []
    for _ in range(rnd.samples):
        point: dict[str, object] = {}
        for path in sorted(rnd.dists):
            kind, args = rnd.dists[path]
            if kind == "uniform":
                point[path] = float(rng.uniform(args[0], args[1]))
            elif kind == "loguniform":
                point[path] = float(np.exp(rng.uniform(np.log(args[0]), np.log(args[1]))))
            elif kind == "randint":
                point[path] = int(rng.integers(args[0], args[1], endpoint=True))
            else:  # choice
                point[path] = args[int(rng.integers(len(args)))]
        out.append(point)
    return out


def combinations(spec: SweepSpec) -> list[dict[str, object]]:
    """Every point's overrides (dotted path -> value), before validation and de-duplication."""
    dims = [[{path: v} for v in values] for path, values in spec.axes.items()]
    for group in spec.zips:
        n = len(next(iter(group.values())))
        dims.append([{path: values[i] for path, values in group.items()} for i in range(n)])
    if spec.random is not None:
        dims.append(draws(spec.random))
    generated = [dict(kv for d in combo for kv in d.items()) for combo in itertools.product(*dims)] if dims else []
    if not generated and not spec.points:
        return [{}]  # no axes: the base config is the one point
    return generated + [dict(p) for p in spec.points]


def _label(indices: list[int], total: int, values: list[dict]) -> str:
    if len(indices) == total and total > 1:
        return "every point"
    if len(indices) == 1:
        shown = ", ".join(f"{k}={v!r}" for k, v in values[indices[0]].items())
        return f"point {indices[0]}" + (f": {shown}" if shown else "")
    head = ", ".join(map(str, indices[:5]))
    more = f" and {len(indices) - 5} more" if len(indices) > 5 else ""
    return f"points {head}{more}"


@dataclass(frozen=True)
class Skipped:
    """Generated combinations left out as invalid together (``sweep.skip_invalid``): how many, and why."""

    count: int
    of: int  # combinations generated
    reasons: dict[str, int]  # "path: message" -> combinations it ruled out

    def line(self) -> str:
        why = "; ".join(f"{r} ({n})" for r, n in self.reasons.items())
        return f"{self.count} of {self.of} combinations skipped as invalid together (sweep.skip_invalid): {why}"


def _invalid_everywhere(combos: list[dict], kept: set[int], generated: int, reasons: dict[int, str]) -> list[Issue]:
    """With skip_invalid: an axis value that no kept combination has is wrong by itself, not together: an error."""
    seen: dict[tuple[str, str], list[int]] = {}
    for index in range(generated):
        for path, value in combos[index].items():
            seen.setdefault((path, repr(value)), []).append(index)
    return [Issue(path, f"{value} is invalid in every combination it is in: {reasons[idx[0]]}")
            for (path, value), idx in seen.items() if not kept.intersection(idx)]


def expand(spec: SweepSpec, schema: Table, identity: ConfigIdentity | None = None
           ) -> tuple[list[Point], list[Issue], int, Skipped | None]:
    """Resolve every point against the command's schema: (points, issues, duplicates dropped, combinations
    skipped as invalid together when the spec says ``skip_invalid``); ``identity`` (of ``schema``) gives the ids."""
    issues, bad, set_paths = [], set(), spec.set_paths()
    for path in spec.swept_paths():
        problem = path_problem(schema, path)
        if problem is None:
            continue
        bad.add(path)
        if path in set_paths:
            issues.append(Issue(path, problem))
        else:
            issues.append(Issue(f"sweep.partition_by[{spec.partition_by.index(path)}]", f"{path!r}: {problem}"))
    combos = combinations(spec)
    generated = len(combos) - len(spec.points)  # explicit points follow the generated combinations
    problems: dict[tuple[str, str], list[int]] = {}
    skipped: dict[int, str] = {}  # index -> why (skip_invalid)
    points: list[Point] = []
    seen: set[str] = set()
    identity = identity or ConfigIdentity(schema)  # one per expansion: each trace read once, each default once
    for index, values in enumerate(combos):
        cfg, found = validate(apply_overrides(spec.base, list(values.items())), schema)
        for key in spec.partition_by:
            value = get_path(cfg, key)
            if value is not None and not isinstance(value, SCALARS):
                found.append(Issue(key, f"a partition key needs a single value (number, string, bool), got {value!r}"))
        found = [i for i in found if i.path not in bad]  # already reported once, with a hint
        if found and spec.skip_invalid and index < generated:
            skipped[index] = "; ".join(str(i) for i in found)
            continue
        for i in found:
            problems.setdefault((i.path, i.message), []).append(index)
        if found:
            continue
        pid = identity.point_id(cfg)
        if pid not in seen:
            seen.add(pid)
            points.append(Point(index, pid, values, cfg))
    issues += [Issue(path, f"{message} ({_label(idx, len(combos), combos)})")
               for (path, message), idx in problems.items()]
    skip = None
    if skipped:
        kept = set(range(generated)) - set(skipped)
        issues += _invalid_everywhere(combos, kept, generated, skipped)
        if not kept:
            issues.append(Issue("sweep.skip_invalid", f"every combination is invalid: {next(iter(skipped.values()))}"))
        reasons: dict[str, int] = {}
        for why in skipped.values():
            reasons[why] = reasons.get(why, 0) + 1
        skip = Skipped(len(skipped), generated, reasons)
    return points, issues, 0 if issues else len(combos) - len(skipped) - len(points), skip

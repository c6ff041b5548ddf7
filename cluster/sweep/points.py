"""Expanding a sweep spec into points: each a fully resolved, validated config with a stable id.

The generated points are the cartesian product of the grid axes, the zipped groups and
the random draws (each one dimension), in spec order with the last dimension varying
fastest; explicit points follow. A point's id is the hash of its resolved config, so
the same config gets the same id in any spec, and reruns find their finished points.
"""

from __future__ import annotations

import difflib
import itertools
import re
from dataclasses import dataclass

import numpy as np

from cluster.config import Issue, OpenTable, Table, config_hash
from cluster.config.loader import apply_overrides
from cluster.config.schema import TableList, all_paths, get_path, validate
from cluster.sweep.spec import RandomAxes, SweepSpec

SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class Point:
    index: int  # position in the expansion
    id: str  # config_hash of the resolved config
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
        point = {}
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


def expand(spec: SweepSpec, schema: Table) -> tuple[list[Point], list[Issue], int]:
    """Resolve every point against the command's schema: (points, issues, duplicates dropped)."""
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
    problems: dict[tuple[str, str], list[int]] = {}
    points: list[Point] = []
    seen: set[str] = set()
    for index, values in enumerate(combos):
        cfg, found = validate(apply_overrides(spec.base, list(values.items())), schema)
        for key in spec.partition_by:
            value = get_path(cfg, key)
            if value is not None and not isinstance(value, SCALARS):
                found.append(Issue(key, f"a partition key needs a single value (number, string, bool), got {value!r}"))
        found = [i for i in found if i.path not in bad]  # already reported once, with a hint
        for i in found:
            problems.setdefault((i.path, i.message), []).append(index)
        if found:
            continue
        pid = config_hash(cfg)
        if pid not in seen:
            seen.add(pid)
            points.append(Point(index, pid, values, cfg))
    issues += [Issue(path, f"{message} ({_label(idx, len(combos), combos)})")
               for (path, message), idx in problems.items()]
    return points, issues, 0 if issues else len(combos) - len(points)

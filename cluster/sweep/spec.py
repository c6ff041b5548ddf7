"""The sweep spec (TOML): a base config, the axes to vary, and how to run and store the points.

Parsing checks the spec's own structure and collects every problem with its key path;
whether the axes name real config keys and every point is a valid config is checked
when the points are expanded (points.py), against the command's schema.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cluster.config import Field, Issue, Table
from cluster.config.loader import read_toml, resolve_file_value, resolve_files
from cluster.config.schema import REQUIRED, validate
from cluster.config.source import read_document
from cluster.errors import UserError

DISTRIBUTIONS = ("uniform", "loguniform", "randint", "choice")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

SWEEP_SECTION = Table({
    "name": Field("str", REQUIRED, "sweep name: the dataset directory DIR/<name>/ and the sweep_id column"),
    "command": Field("str", REQUIRED, "what each point runs: noc (rdasim noc) or run (rdasim run)"),
    "partition_by": Field("list", [], "dotted config paths whose values become hive partition directories",
                          item=Field("str")),
    "max_retries": Field("int", 3, "retries of a point after a system failure (worker or node died)", min=0),
    "max_concurrency": Field("int", None, "points in flight at once (default: what the cluster's CPUs hold)",
                             min=1),
    "description": Field("str", "", "free text, kept in the manifest"),
    "skip_invalid": Field("bool", False, "leave out the generated combinations whose values are invalid together "
                          "(e.g. memory.spill = \"nearest\" with a static policy), with one line saying how many "
                          "and why; a value invalid in every combination is still an error"),
    "compact": Field("choice", "auto", "when a run finishes, rewrite each table's point files into files of "
                     "compact_rows rows: auto (once a table holds 1,000 point files), always, never",
                     choices=("auto", "always", "never")),
    "compact_rows": Field("int", 100_000, "rows of a compacted file (a point's rows are never split)", min=1),
    "step_cache": Field("str", "", "a directory of simulated anchors the sweep's serve points share: each point "
                        "that sets no workload.decode.step_cache runs with this one (relative to the results "
                        "directory); how the points run, not what they simulate: outside the spec's hash and "
                        "the points' ids"),
})

RANDOM_SECTION = Table({
    "samples": Field("int", None, "number of random draws", min=1),
    "seed": Field("int", 0, "seed of the draws (independent of run.seed)", min=0),
    "axes": Field("any", None, "dotted config path -> {uniform|loguniform|randint = [lo, hi]} or {choice = [...]}"),
})

TOP_LEVEL = ("sweep", "base", "axes", "zip", "random", "points")
# [sweep] keys that say how to run and store the points, not what they are: outside the spec's hash
EXECUTION_KEYS = ("max_retries", "max_concurrency", "description", "compact", "compact_rows", "step_cache")


@dataclass(frozen=True)
class RandomAxes:
    """``samples`` draws of every distribution, from a generator seeded with ``seed``."""

    samples: int
    seed: int
    dists: dict[str, tuple[str, list]]  # dotted path -> (distribution, arguments)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    command: str
    partition_by: tuple[str, ...]
    max_retries: int
    max_concurrency: int | None
    description: str
    base: dict  # raw base config (before validation)
    axes: dict[str, list]  # dotted path -> values: cartesian product
    zips: list[dict[str, list]]  # groups of equally long lists, advanced together
    random: RandomAxes | None
    points: list[dict[str, object]]  # explicit points: dotted path -> value
    raw: dict = field(default_factory=dict)  # the spec as written (kept in the manifest and files)
    source: str = ""
    text: str = ""  # the spec file's text (kept in the manifest with each spec version)
    skip_invalid: bool = False  # generated combinations invalid together are left out, not errors
    compact: str = "auto"  # when a run finishes: auto, always, never (cluster/sweep/compact.py)
    compact_rows: int = 100_000  # rows of a compacted file
    step_cache: str = ""  # anchors the serve points share (a directory; relative: under the results directory)

    def set_paths(self) -> list[str]:
        """Every dotted path the axes, zips, random draws or explicit points set, in spec order."""
        out: list[str] = []
        groups: list[Mapping[str, object]] = [self.axes, *self.zips, self.random.dists if self.random else {},
                                              *self.points]
        for group in groups:
            out += [p for p in group if p not in out]
        return out

    def swept_paths(self) -> list[str]:
        """The set paths and the partition keys: each becomes a dataset column."""
        out = self.set_paths()
        return out + [p for p in self.partition_by if p not in out]


def flatten(table: dict, prefix: str = "", leaf=lambda v: not isinstance(v, dict)) -> dict[str, object]:
    """{'noc': {'rate': [..]}, 'run.seed': [..]} -> {'noc.rate': [..], 'run.seed': [..]}."""
    out = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if leaf(value):
            out[path] = value
        else:
            out.update(flatten(value, path + ".", leaf))
    return out


def _is_dist(value) -> bool:
    return not isinstance(value, dict) or (len(value) == 1 and next(iter(value)) in DISTRIBUTIONS)


def _lists(group: dict, where: str, issues: list[Issue]) -> dict[str, list]:
    out = {}
    for path, values in flatten(group).items():
        if not isinstance(values, list):
            issues.append(Issue(f"{where}.{path}", f"expected a list of values, got {values!r}"))
        elif not values:
            issues.append(Issue(f"{where}.{path}", "is an empty list: the sweep would have no points"))
        else:
            out[path] = values
    return out


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _dist_problem(kind: str, args) -> str | None:
    if not isinstance(args, list):
        return f"{kind} takes a list, got {args!r}"
    if kind == "choice":
        return None if args else "choice needs at least one value"
    if len(args) != 2 or not all(_number(a) for a in args):
        return f"{kind} takes [low, high] numbers, got {args!r}"
    lo, hi = args
    if kind == "randint" and not all(isinstance(a, int) for a in args):
        return f"randint takes whole numbers, got {args!r}"
    if (lo > hi) if kind == "randint" else (lo >= hi):
        return f"low {lo} must be below high {hi}"
    if kind == "loguniform" and lo <= 0:
        return f"loguniform needs a positive low bound, got {lo}"
    return None


def _random(raw, issues: list[Issue]) -> RandomAxes | None:
    if raw is None:
        return None
    rnd, found = validate({"random": raw}, Table({"random": RANDOM_SECTION}))
    rnd = rnd["random"]
    issues += found
    axes = rnd.get("axes")
    if axes is None or found:
        if axes is None and not found:
            issues.append(Issue("random.axes", "is required: the distributions to draw from"))
        return None
    if not isinstance(axes, dict) or not axes:
        issues.append(Issue("random.axes", "expected a table of dotted path = {distribution = [...]}"))
        return None
    dists = {}
    for path, spec in flatten(axes, leaf=_is_dist).items():
        where = f"random.axes.{path}"
        if not isinstance(spec, dict):
            issues.append(Issue(where, f"expected {{uniform = [lo, hi]}}, {{randint = [lo, hi]}}, "
                                       f"{{loguniform = [lo, hi]}} or {{choice = [...]}}, got {spec!r}"))
            continue
        kind, args = next(iter(spec.items()))
        problem = _dist_problem(kind, args)
        if problem:
            issues.append(Issue(where, problem))
        else:
            dists[path] = (kind, list(args))
    if rnd["samples"] is None:
        issues.append(Issue("random.samples", "is required: how many points to draw"))
        return None
    return RandomAxes(rnd["samples"], rnd["seed"], dists)


def table_array(raw, where: str, issues: list[Issue]) -> list[dict]:
    """An array of tables ([[where]]) as a list of dicts; an issue if it is anything else."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        issues.append(Issue(where, f"expected an array of tables ([[{where}]])"))
        return []
    return raw


def read_base(raw, base_dir: Path, issues: list[Issue], schema: Table | None = None) -> dict:
    """The base config: a [base] table, or a TOML file named relative to the spec. With the
    command's ``schema``, its file paths are taken from where they are written, as `rdasim run`
    takes a config's: a base file's from its directory, a [base] table's from the spec's."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return resolve_files(raw, schema, base_dir) if schema is not None else raw
    if isinstance(raw, str):
        try:
            cfg = read_toml(base_dir / raw)
        except UserError as exc:
            issues.append(Issue("base", exc.message))
            return {}
        return resolve_files(cfg, schema, (base_dir / raw).parent) if schema is not None else cfg
    issues.append(Issue("base", f"expected a file name or a [base] table, got {raw!r}"))
    return {}


def command_schema(name: object) -> Table | None:
    """The config schema of the sweep command called ``name`` (None: no such command)."""
    from cluster.sweep import commands

    return commands.COMMANDS[name].schema() if isinstance(name, str) and name in commands.COMMANDS else None


def _files_from(group: Mapping[str, Any], schema: Table | None, base_dir: Path, lists: bool) -> dict:
    """A group of dotted path -> value (or -> values, ``lists``) with relative file paths taken
    from the spec's directory."""
    if schema is None:
        return dict(group)
    if lists:
        return {p: [resolve_file_value(schema, p, v, base_dir) for v in vs] for p, vs in group.items()}
    return {p: resolve_file_value(schema, p, v, base_dir) for p, v in group.items()}


def _zips(raw, issues: list[Issue]) -> list[dict[str, list]]:
    out = []
    for i, group in enumerate(table_array(raw, "zip", issues)):
        lists = _lists(group, f"zip[{i}]", issues)
        lengths = {p: len(v) for p, v in lists.items()}
        if len(set(lengths.values())) > 1:
            issues.append(Issue(f"zip[{i}]", "lists must have the same length: "
                                + ", ".join(f"{p} has {n}" for p, n in lengths.items())))
        elif lists:
            out.append(lists)
    return out


def _swept_twice(groups: list[tuple[str, dict]]) -> list[Issue]:
    """A path may vary in one dimension only (the axes, one zip group, or the random draws)."""
    seen: dict[str, str] = {}
    issues = []
    for where, group in groups:
        for path in group:
            if path in seen:
                issues.append(Issue(f"{where}.{path}", f"is already swept in {seen[path]}"))
            seen[path] = where
    return issues


def parse_spec(raw: dict, base_dir: Path, source: str = "") -> tuple[SweepSpec, list[Issue]]:
    """Check a spec's structure; return (spec, issues): the spec as far as it could be read, and every problem."""
    issues: list[Issue] = []
    for key in raw:
        if key not in TOP_LEVEL:
            close = difflib.get_close_matches(key, TOP_LEVEL, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(TOP_LEVEL)}"
            issues.append(Issue(key, f"unknown key; {hint}"))
    sweep, found = validate({"sweep": raw.get("sweep", {})}, Table({"sweep": SWEEP_SECTION}))
    sweep = sweep["sweep"]
    issues += found
    if sweep.get("name") is not None and not NAME_RE.match(sweep["name"]):
        issues.append(Issue("sweep.name", f"{sweep['name']!r} must start with a letter or digit, then "
                                          "letters, digits, '.', '_' or '-' (it names a directory)"))
    axes = raw.get("axes", {})
    if not isinstance(axes, dict):
        issues.append(Issue("axes", "expected a table of dotted path = [values]"))
        axes = {}
    grid = _lists(axes, "axes", issues)
    zips = _zips(raw.get("zip"), issues)
    rnd = _random(raw.get("random"), issues)
    points = [flatten(t) for t in table_array(raw.get("points"), "points", issues)]
    issues += _swept_twice([("axes", grid), *((f"zip[{i}]", z) for i, z in enumerate(zips)),
                            ("random.axes", rnd.dists if rnd else {})])
    schema = command_schema(sweep.get("command"))  # its file keys: paths relative to where they are written
    base = read_base(raw.get("base"), base_dir, issues, schema)
    grid = _files_from(grid, schema, base_dir, lists=True)
    zips = [_files_from(z, schema, base_dir, lists=True) for z in zips]
    points = [_files_from(p, schema, base_dir, lists=False) for p in points]
    spec = SweepSpec(  # best effort even with issues, so the points' problems can be listed too
        name=sweep.get("name") or "", command=sweep.get("command") or "",
        partition_by=tuple(sweep.get("partition_by") or ()), max_retries=sweep.get("max_retries") or 0,
        max_concurrency=sweep.get("max_concurrency"), description=sweep.get("description") or "",
        base=base, axes=grid, zips=zips, random=rnd, points=points, raw=raw, source=source,
        skip_invalid=bool(sweep.get("skip_invalid")),
        compact=sweep.get("compact") or "auto", compact_rows=sweep.get("compact_rows") or 100_000,
        step_cache=sweep.get("step_cache") or "",
    )
    return spec, issues


def read_spec(given: str | Path | Mapping[str, Any]) -> tuple[SweepSpec, list[Issue]]:
    """A spec file, TOML text or a dict, parsed (cluster/config/source.py ``read_document``)."""
    doc = read_document(given, "sweep spec")
    spec, issues = parse_spec(doc.raw, doc.base_dir, doc.source)
    return replace(spec, text=doc.text), issues


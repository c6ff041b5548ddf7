"""The explore spec (TOML): a base config like a sweep's, and [explore] with the space, objectives and constraints.

    base = "kv_decode.toml"            # or a [base] table
    [explore]
    command = "run"                    # what each trial runs (a sweep command)
    optimizer = "tpe"                  # random, grid, tpe, gp, nsga2
    budget = 60                        # trials (candidates the optimiser proposes)
    parallel = 4                       # trials in flight on Ray
    seed = 0
    reference = { tokens_per_second = 0.0 }   # hypervolume reference (default: worst feasible + 10 %)
    [explore.fidelity]                 # optional: successive halving over cut runs
    cycles = [4000]                    # run.max_cycles of the cheap rungs
    eta = 3                            # a rung promotes its best third
    [explore.space]
    "memory.policy" = { type = "categorical", values = ["virtual", "static-multi"] }
    "memory.block_bytes" = { type = "ordinal", values = ["1KiB", "4KiB"], when = { "memory.policy" = "virtual" } }
    [[explore.objectives]]
    metric = "tokens_per_second"       # any numeric column of the command's result table
    direction = "maximize"
    [[explore.constraints]]
    expr = "chip.mu_bytes * chip.rows * chip.cols <= 4MiB"   # on config keys: checked before simulating
    [[explore.constraints]]
    expr = "latency_p99_cycles <= 50000"                     # on result metrics: checked after the run

Every problem is collected with its key path (``parse_explore`` returns them), and the
checks that need the command's schema (keys exist, values are valid, metrics are columns)
are made here too, so a bad spec fails before any Ray or simulation starts.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from cluster.config import ConfigError, Issue, Table, config_hash
from cluster.config.identity import ConfigIdentity
from cluster.config.loader import apply_overrides
from cluster.config.schema import Field, get_path, validate
from cluster.config.source import read_document
from cluster.errors import UserError
from cluster.explore.constraints import Constraint, ConstraintError, parse_constraint
from cluster.explore.space import TYPES, Param, Space, order_params
from cluster.sweep import commands
from cluster.sweep.plan import AxisColumns, SweepPlan, column_collisions, infer_type
from cluster.sweep.points import path_problem
from cluster.sweep.spec import SweepSpec, flatten, read_base, table_array

DATASET = "trials"  # DIR/trials/: the trials' hive dataset (its sweep_id too)
TOP_LEVEL = ("explore", "base")
DIRECTIONS = ("minimize", "maximize")

EXPLORE_SECTION = Table({
    "command": Field("str", "run", "what each trial runs: run (rdasim run), system or noc"),
    "optimizer": Field("str", "tpe", "random, grid, tpe, gp or nsga2"),
    "budget": Field("int", 50, "trials: candidates the optimiser proposes (each is at least one run)"),
    "parallel": Field("int", 4, "trials in flight at once on Ray", min=1),
    "seed": Field("int", 0, "seed of the optimiser (independent of run.seed)", min=0),
    "max_retries": Field("int", 3, "retries of a trial's run after a system failure", min=0),
    "reference": Field("any", None, "hypervolume reference point: {metric = value} (default: the worst feasible "
                                    "value of each objective plus 10 % of its range)"),
    "description": Field("str", "", "free text, kept in the manifest"),
    "space": Field("any", None, "dotted config key -> {type, low, high, log, step, values, when}"),
    "objectives": Field("any", None, "[[explore.objectives]]: {metric, direction}"),
    "constraints": Field("any", [], "[[explore.constraints]]: {expr}"),
    "fidelity": Field("any", None, "{cycles = [run.max_cycles of each cheap rung], eta = promotion factor}"),
})
PARAM_KEYS = ("type", "low", "high", "log", "step", "values", "when")
FIDELITY_KEYS = ("cycles", "eta")


@dataclass(frozen=True)
class Objective:
    metric: str
    direction: str  # minimize | maximize

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"

    def to_json(self) -> dict:
        return {"metric": self.metric, "direction": self.direction}


@dataclass(frozen=True)
class KnownConstraint:
    """A constraint on config keys (``on_config``: checked before simulating) or on result metrics (after)."""

    constraint: Constraint
    on_config: bool


@dataclass(frozen=True)
class Fidelity:
    """Successive halving: cheap rungs cut at ``cycles`` (increasing), then the full run; a rung promotes 1/eta."""

    cycles: tuple[int, ...]
    eta: int


@dataclass(frozen=True)
class ExploreSpec:
    command: commands.Command
    optimizer: str
    budget: int
    parallel: int
    seed: int
    max_retries: int
    description: str
    space: Space
    objectives: tuple[Objective, ...]
    constraints: tuple[KnownConstraint, ...]
    fidelity: Fidelity | None
    reference: dict[str, float] | None
    base: dict  # the raw base config
    sweep: SweepPlan  # how a trial lands as a sweep point: the dataset's name, columns and spec hash
    source: str = ""

    @property
    def spec_hash(self) -> str:
        return self.sweep.spec_hash


def _unknown(keys, known: tuple[str, ...], where: str, issues: list[Issue]) -> None:
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known)}"
            issues.append(Issue(f"{where}.{key}", f"unknown key; {hint}"))


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _param(key: str, raw: dict, issues: list[Issue]) -> Param | None:
    where = f"explore.space.{key}"
    before = len(issues)
    _unknown(raw, PARAM_KEYS, where, issues)
    kind = raw.get("type")
    if kind not in TYPES:
        issues.append(Issue(f"{where}.type", f"{kind!r} is not one of {', '.join(TYPES)}"))
        return None
    low: Any = raw.get("low")
    high: Any = raw.get("high")
    log: Any = raw.get("log", False)
    step: Any = raw.get("step")
    values: Any = raw.get("values")
    if kind in ("int", "real"):
        if not (_number(low) and _number(high)):
            issues.append(Issue(where, f"a {kind} needs numbers low and high, got low={low!r}, high={high!r}"))
        elif kind == "int" and not (float(low).is_integer() and float(high).is_integer()):
            issues.append(Issue(where, f"an int needs whole low and high, got {low!r}, {high!r}"))
        elif (low > high) if kind == "int" else (low >= high):
            issues.append(Issue(where, f"low {low} must be below high {high}"))
        elif log and low <= 0:
            issues.append(Issue(where, f"log needs a positive low, got {low}"))
        if not isinstance(log, bool):
            issues.append(Issue(f"{where}.log", f"expected true or false, got {log!r}"))
        if step is not None and (kind != "int" or not isinstance(step, int) or step < 1 or log):
            issues.append(Issue(f"{where}.step", "a step is a whole number >= 1, for an int without log"))
        if values is not None:
            issues.append(Issue(f"{where}.values", f"a {kind} takes low and high, not values"))
    else:
        if not isinstance(values, list) or not values:
            issues.append(Issue(f"{where}.values", f"a {kind} needs a non-empty list of values"))
        elif len({repr(v) for v in values}) != len(values):
            issues.append(Issue(f"{where}.values", "lists a value twice"))
        elif not all(isinstance(v, (str, int, float, bool)) for v in values):
            issues.append(Issue(f"{where}.values", "values must be numbers, strings or booleans"))
        for name in ("low", "high", "step"):
            if raw.get(name) is not None:
                issues.append(Issue(f"{where}.{name}", f"a {kind} takes values, not {name}"))
    when = raw.get("when", {})
    if not isinstance(when, dict):
        issues.append(Issue(f"{where}.when", "expected a table {\"key\" = value or [values]}"))
        when = {}
    when = {k: tuple(v) if isinstance(v, list) else (v,) for k, v in flatten(when).items()}
    if len(issues) > before:
        return None
    return Param(key, kind, low, high, bool(log), step, tuple(values or ()), when)


def _is_param(value) -> bool:
    return not isinstance(value, dict) or "type" in value or not value


def _space(raw, schema: Table, base: dict, issues: list[Issue]) -> tuple[Space, list[pa.DataType]]:
    if raw is None or raw == {}:
        issues.append(Issue("explore.space", "is empty: give at least one config key to vary"))
        return Space(()), []
    if not isinstance(raw, dict):
        issues.append(Issue("explore.space", "expected a table of dotted config key = {type = ...}"))
        return Space(()), []
    params = []
    declared = flatten(raw, leaf=_is_param)
    for key, spec in declared.items():
        if not isinstance(spec, dict):
            issues.append(Issue(f"explore.space.{key}", f"expected {{type = ..., ...}}, got {spec!r}"))
            continue
        problem = path_problem(schema, key)
        if problem:
            issues.append(Issue(f"explore.space.{key}", problem))
            continue
        p = _param(key, spec, issues)
        if p is not None:
            params.append(p)
    for p in params:
        for parent in p.when:
            if parent not in declared:  # a declared but broken parent is reported once, as itself
                issues.append(Issue(f"explore.space.{p.key}.when", f"{parent!r} is not a key of the space"))
    ordered = order_params(params) if not issues else params
    if ordered is None:
        issues.append(Issue("explore.space", "the when conditions form a cycle"))
        return Space(tuple(params)), []
    types = [_column_type(p, schema, base, issues) for p in ordered]
    return Space(tuple(ordered)), types


def _column_type(p: Param, schema: Table, base: dict, issues: list[Issue]) -> pa.DataType:
    """Validate each value (or the bounds) of a parameter on the base config; the column type of its resolved values."""
    samples = list(p.values) if p.values else [p.low, p.high]
    if p.type == "int":
        samples = [int(v) for v in samples if v is not None]
    resolved = []
    for v in samples:
        cfg, found = validate(apply_overrides(base, [(p.key, v)]), schema)
        mine = [i for i in found if i.path == p.key]
        for i in mine:
            issues.append(Issue(f"explore.space.{p.key}", f"value {v!r}: {i.message}"))
        if not mine:
            resolved.append(get_path(cfg, p.key))
    if p.type == "real":
        return pa.float64()
    return infer_type(resolved)


def _objectives(raw, command: commands.Command, issues: list[Issue]) -> list[Objective]:
    tables = table_array(raw, "explore.objectives", issues)
    if raw is not None and not tables and not issues:
        issues.append(Issue("explore.objectives", "is empty: give at least one {metric, direction}"))
    if raw is None:
        issues.append(Issue("explore.objectives", "is required: [[explore.objectives]] metric = ..., direction = ..."))
    result = command.result_schema()
    metrics = [f.name for f in result if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)] \
        if result is not None else None
    out: list[Objective] = []
    for i, t in enumerate(tables):
        where = f"explore.objectives[{i}]"
        _unknown(t, ("metric", "direction"), where, issues)
        metric, direction = t.get("metric"), t.get("direction", "minimize")
        if direction not in DIRECTIONS:
            issues.append(Issue(f"{where}.direction", f"{direction!r} is not minimize or maximize"))
        if not isinstance(metric, str):
            issues.append(Issue(f"{where}.metric", "is required: a numeric column of the result"))
        elif metrics is not None and metric not in metrics:
            close = difflib.get_close_matches(metric, metrics, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            issues.append(Issue(f"{where}.metric", f"{metric!r} is not a metric of {command.result}{hint}"))
        elif any(o.metric == metric for o in out):
            issues.append(Issue(f"{where}.metric", f"{metric!r} is already an objective"))
        else:
            out.append(Objective(metric, direction))
    return out


def _constraints(raw, command: commands.Command, schema: Table, issues: list[Issue]) -> list[KnownConstraint]:
    result = command.result_schema()
    metrics = set(result.names) if result is not None else set()
    out = []
    for i, t in enumerate(table_array(raw, "explore.constraints", issues)):
        where = f"explore.constraints[{i}]"
        _unknown(t, ("expr",), where, issues)
        try:
            c = parse_constraint(t.get("expr", ""))
        except ConstraintError as exc:
            issues.append(Issue(f"{where}.expr", str(exc)))
            continue
        on_config = True
        for key in c.keys:
            if key in metrics and "." not in key:
                on_config = False
            elif (problem := path_problem(schema, key)) is not None:
                issues.append(Issue(f"{where}.expr", f"{key!r}: {problem} (nor a metric of {command.result})"))
        out.append(KnownConstraint(c, on_config))
    return out


def _fidelity(raw, issues: list[Issue]) -> Fidelity | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        issues.append(Issue("explore.fidelity", "expected a table {cycles = [...], eta = ...}"))
        return None
    _unknown(raw, FIDELITY_KEYS, "explore.fidelity", issues)
    cycles: Any = raw.get("cycles")
    eta: Any = raw.get("eta", 3)
    ok = isinstance(cycles, list) and cycles and all(isinstance(c, int) and c >= 1 for c in cycles) \
        and all(a < b for a, b in zip(cycles, cycles[1:]))
    if not ok:
        issues.append(Issue("explore.fidelity.cycles", "expected an increasing list of whole cycle counts >= 1"))
    if not isinstance(eta, int) or isinstance(eta, bool) or eta < 2:
        issues.append(Issue("explore.fidelity.eta", f"expected a whole number >= 2, got {eta!r}"))
    return Fidelity(tuple(cycles), eta) if ok and isinstance(eta, int) and eta >= 2 else None


def _reference(raw, objectives: list[Objective], issues: list[Issue]) -> dict[str, float] | None:
    if raw is None:
        return None
    names = [o.metric for o in objectives]
    if not isinstance(raw, dict) or set(raw) != set(names) or not all(_number(v) for v in raw.values()):
        issues.append(Issue("explore.reference", f"expected a number for each objective: {', '.join(names)}"))
        return None
    return {k: float(v) for k, v in raw.items()}


# what a spec asks for (its hash: a rerun continues only the same question); how it is run is left out
WHAT = ("command", "space", "objectives", "constraints", "fidelity")


def explore_hash(explore: Mapping, base: dict, identity: ConfigIdentity) -> str:
    """Hash of what an [explore] section asks for (WHAT) of its base config as given: each file the base or a
    space's value names by its content and the space by its dotted keys (cluster/config/identity.py), so the
    same spec from another clone, or after a commit adding a config key, continues the same study."""
    what = {k: explore.get(k) for k in WHAT}
    if isinstance(what["space"], dict):
        what["space"] = {key: _identified(key, p, identity)
                         for key, p in flatten(what["space"], leaf=_is_param).items()}
    return config_hash({"explore": what, "base": identity.given(base)})


def _identified(key: str, param: object, identity: ConfigIdentity) -> object:
    """A parameter's declaration with its values and its when conditions' values as set (files by content)."""
    if not isinstance(param, dict):
        return param
    out = dict(param)
    if isinstance(param.get("values"), list):
        out["values"] = [identity.set_at(key, v) for v in param["values"]]
    if isinstance(param.get("when"), dict):
        out["when"] = {k: [identity.set_at(k, x) for x in v] if isinstance(v, list) else identity.set_at(k, v)
                       for k, v in flatten(param["when"]).items()}
    return out


def parse_explore(raw: dict, base_dir: Path, source: str = "", text: str = "") -> ExploreSpec:
    """Check a spec and everything it names against the command's schema; raise ConfigError (or a
    one-line UserError for a single problem) listing every problem."""
    issues: list[Issue] = []
    _unknown(raw, TOP_LEVEL, "", issues)
    issues = [replace(i, path=i.path.lstrip(".")) for i in issues]
    section, found = validate({"explore": raw.get("explore", {})}, Table({"explore": EXPLORE_SECTION}))
    ex = section["explore"]
    issues += found
    if "explore" not in raw:
        issues.append(Issue("explore", "is required: the [explore] table"))
    command = None
    if ex.get("command") not in commands.COMMANDS:
        close = difflib.get_close_matches(str(ex.get("command")), commands.LISTED, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        issues.append(Issue("explore.command", f"{ex.get('command')!r} is not one of {', '.join(commands.LISTED)}"
                                               f"{hint}"))
    else:
        command = commands.get(ex["command"])
    from cluster.explore.optimizers import OPTIMIZERS

    if ex.get("optimizer") not in OPTIMIZERS:
        issues.append(Issue("explore.optimizer", f"{ex.get('optimizer')!r} is not one of {', '.join(OPTIMIZERS)}"))
    if ex.get("budget") is not None and ex["budget"] < 1:
        issues.append(Issue("explore.budget", f"must be at least 1 trial, got {ex['budget']}"))
    base = read_base(raw.get("base"), base_dir, issues, command.schema() if command is not None else None)
    if command is None:
        _raise(source, issues)
    assert command is not None
    schema = command.schema()
    space, types = _space(ex.get("space"), schema, base, issues)
    if ex.get("optimizer") in OPTIMIZERS and OPTIMIZERS[ex["optimizer"]].finite_only \
            and any(p.type == "real" for p in space.params):
        issues.append(Issue("explore.optimizer", f"{ex['optimizer']} needs a finite space: make each real "
                                                 "parameter an ordinal with values"))
    objectives = _objectives(ex.get("objectives"), command, issues)
    constraints = _constraints(ex.get("constraints"), command, schema, issues)
    fidelity = _fidelity(ex.get("fidelity"), issues)
    reference = _reference(ex.get("reference"), objectives, issues)
    from cluster.explore.trials import TRIAL_FIELDS

    issues += column_collisions(space.keys, command, tuple(f.name for f in TRIAL_FIELDS))
    _, base_issues = validate(base, schema)
    issues += [replace(i, path=f"base.{i.path}") for i in base_issues if i.path not in space.keys]
    if fidelity is not None and command.name == "noc":
        issues.append(Issue("explore.fidelity", "cut runs (run.max_cycles) need command run or system"))
    _raise(source, issues)
    spec_hash = explore_hash(raw["explore"], base, ConfigIdentity(schema))
    sweep_spec = SweepSpec(name=DATASET, command=command.name, partition_by=(), max_retries=ex["max_retries"],
                           max_concurrency=ex["parallel"], description=ex["description"], base=base, axes={},
                           zips=[], random=None, points=[], raw=raw, source=source, text=text)
    sweep = SweepPlan(sweep_spec, command, [], AxisColumns(tuple(space.keys), tuple(types)), 0, spec_hash,
                      legacy_spec_hash=legacy_hash(raw["explore"], base))
    return ExploreSpec(command, ex["optimizer"], ex["budget"], ex["parallel"], ex["seed"], ex["max_retries"],
                       ex["description"], space, tuple(objectives), tuple(constraints), fidelity, reference, base,
                       sweep, source)


def legacy_hash(explore: Mapping, base: dict) -> str:
    """The hash the earlier rule gave a spec: what it asks for as written, its base's files by path (a study
    stored then is recognised by it: cluster/explore/known.py)."""
    return config_hash({"explore": {k: explore.get(k) for k in WHAT}, "base": base})


def _raise(source: str, issues: list[Issue]) -> None:
    if len(issues) == 1:
        raise UserError(f"{source or 'explore spec'}: {issues[0]}")
    if issues:
        raise ConfigError(source or "explore spec", issues)


def read_explore(given: str | Path | Mapping[str, Any]) -> ExploreSpec:
    """An explore spec file, TOML text or a dict, checked (cluster/config/source.py ``read_document``)."""
    doc = read_document(given, "explore spec")
    return parse_explore(doc.raw, doc.base_dir, doc.source, doc.text)

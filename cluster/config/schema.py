"""Validation of config schemas.

A schema is a tree of ``Table`` (TOML tables), ``TableList`` (arrays of tables),
``OpenTable`` (free keys, one value type) and ``Field`` leaves, declared with sim/keys.py
(so a memory policy or a workload declares its keys beside its code). ``validate``
walks a raw TOML dict against it, normalises units, fills defaults, and returns every
problem found (with its dotted key path) rather than stopping at the first.
"""

from __future__ import annotations

import difflib
import math

from cluster.config import units
from sim.keys import REQUIRED, Field, Issue, OpenTable, Table, TableList

__all__ = ["NEEDS_UNIT", "REQUIRED", "Field", "Issue", "OpenTable", "Table", "TableList", "all_paths", "check_field",
           "get_path", "spell_units", "validate", "walk"]

_PARSERS = {
    "size": units.parse_size,
    "frequency": units.parse_frequency,
    "bandwidth": units.parse_bandwidth,
    "time": units.parse_time,
    "duration": units.parse_duration,
    "flops": units.parse_flops,
}
# Kinds a value must give the unit of (a bare 64 would silently be 64 B/s, 64 s or 64 Hz), with
# the base unit a bare number in code (a default, a preset) is in. Sizes may stay bare (bytes),
# and so may cycles: both are the simulator's native integers. Zero needs no unit.
NEEDS_UNIT = {"bandwidth": ("B/s", "GB/s", "Gb/s"), "time": ("s", "ms", "ns"), "frequency": ("Hz", "GHz", "MHz"),
              "flops": ("FLOPS", "TFLOPS", "GFLOPS")}


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_field(f: Field, value, path: str, issues: list[Issue], bare: bool = False):
    """Normalise one leaf value; append an Issue and return None on failure. ``bare``: a number
    of a kind that needs a unit is in its base unit (a default written in the code)."""
    if value is None:
        return None
    kind = f.kind
    try:
        if kind in NEEDS_UNIT and not bare and _number(value) and value != 0:
            base, *others = NEEDS_UNIT[kind]
            other = ", ".join(f'"{units.plain(value)}{u}"' for u in others)
            raise ValueError(f"{_describe(value)} has no unit: a {kind} needs one; in {base} that is "
                             f'"{units.spell(value, kind)}" (read in other units: {other})')
        if kind == "int_or_auto" and value == "auto":
            return value
        elif kind in _PLAIN:
            out = _plain(f, value)
        elif kind in _PARSERS:
            out = _PARSERS[kind](value)
        elif kind == "cycles":
            if isinstance(value, str):
                out = ("time", units.parse_time(value))  # resolved against the clock later
            else:
                out = check_field(Field("int"), value, path, issues)
                if out is None:
                    return None
        elif kind == "list":
            if not isinstance(value, list):
                raise ValueError(f"expected a list, got {_describe(value)}")
            out = []
            for i, v in enumerate(value):
                if f.item is None:
                    out.append(v)
                    continue
                before = len(issues)
                nv = check_field(f.item, v, f"{path}[{i}]", issues, bare)
                if len(issues) == before:
                    out.append(nv)
            return out
        else:  # pragma: no cover - schema bug
            raise ValueError(f"unknown field kind {kind!r}")
    except (ValueError, units.UnitError) as exc:
        issues.append(Issue(path, str(exc)))
        return None
    if isinstance(out, (int, float)) and not isinstance(out, bool):
        if f.min is not None and out < f.min:
            issues.append(Issue(path, f"{_describe(value)} is below the minimum {f.min:g}"))
            return None
        if f.max is not None and out > f.max:
            issues.append(Issue(path, f"{_describe(value)} is above the maximum {f.max:g}"))
            return None
    return out


_PLAIN = ("any", "bool", "int", "int_or_auto", "float", "str", "choice")  # the kinds _plain checks


def _plain(f: Field, value):
    """A value of a kind that needs no parsing (``_PLAIN``), checked: ValueError says what is wrong."""
    kind = f.kind
    if kind == "any":
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {_describe(value)}")
        return value
    if kind in ("int", "int_or_auto"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not value.is_integer()
        ):
            also = ' or "auto"' if kind == "int_or_auto" else ""
            raise ValueError(f"expected a whole number{also}, got {_describe(value)}")
        out = int(value)
        if not INT64_MIN <= out <= INT64_MAX:  # stored in int64 columns and numpy arrays: refused here, not later
            raise ValueError(f"{_describe(value)} is out of range: a whole number here must fit in 64 bits "
                             f"({INT64_MIN:,} to {INT64_MAX:,})")
        return out
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {_describe(value)}")
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"expected a finite number, got {_describe(value)}")
        return number
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {_describe(value)}")
        return value
    if value not in tuple(f.choices):  # a choice
        close = difflib.get_close_matches(str(value), [str(c) for c in f.choices], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"{_describe(value)} is not one of {', '.join(map(str, f.choices))}{hint}")
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def spell_units(raw, schema: Table):
    """``raw`` with every bare number of a kind that needs a unit written in its base unit
    (450e9 as "450000000000.0B/s"): for values from the code (a preset), not from the user."""
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    fields = schema.fields
    for key, value in raw.items():
        node = fields.get(key)
        if isinstance(node, Table):
            out[key] = spell_units(value, node)
        elif isinstance(node, TableList) and isinstance(value, list):
            out[key] = [spell_units(v, node.table) for v in value]
        elif isinstance(node, Field) and node.kind in NEEDS_UNIT and _number(value):
            out[key] = f"{float(value)!r}{NEEDS_UNIT[node.kind][0]}"
    return out


def walk(schema: Table, prefix: str = ""):
    """(dotted path, node) of every leaf: Fields and OpenTables; arrays of tables as ``key[]``."""
    for key, node in schema.fields.items():
        p = f"{prefix}{key}"
        if isinstance(node, Table):
            yield from walk(node, p + ".")
        elif isinstance(node, TableList):
            yield from walk(node.table, p + "[].")
        else:
            yield p, node


def all_paths(schema: Table) -> list[str]:
    """Every dotted leaf path of a schema (for 'did you mean' across sections)."""
    return [p for p, _ in walk(schema)]


def fill_presets(raw, table: Table):
    """``raw`` with every table that names a preset (its ``Table.fill``) given the preset's keys
    under its own, nested tables too; the keys given always win."""
    if not isinstance(raw, dict):
        return raw
    out = table.fill(raw) if table.fill is not None else dict(raw)
    fields = table.fields
    for key, value in out.items():
        sub = fields.get(key)
        if isinstance(sub, Table) and isinstance(value, dict):
            out[key] = fill_presets(value, sub)
    return out


def validate(raw: dict, schema: Table) -> tuple[dict, list[Issue]]:
    """Check ``raw`` against ``schema``; return (normalised dict with defaults, issues)."""
    issues: list[Issue] = []
    everything = all_paths(schema)
    out = _walk_table(fill_presets(raw, schema), schema, "", issues, everything)
    _resolve_cycles(out, schema, out, "", issues)
    return out, issues


def _unknown(key: str, path: str, table: Table, everything: list[str]) -> Issue:
    siblings = list(table.fields)
    close = difflib.get_close_matches(key, siblings, n=1, cutoff=0.6)
    if close:
        hint = f"did you mean '{path}{close[0]}'?"
    else:
        # maybe it belongs to another section: match on the last component
        leafs = {p.rsplit(".", 1)[-1]: p for p in everything}
        near = difflib.get_close_matches(key, list(leafs), n=1, cutoff=0.8)
        hint = f"did you mean '{leafs[near[0]]}'?" if near else (
            f"known keys here: {', '.join(siblings)}" if siblings else "no keys are allowed here"
        )
    return Issue(f"{path}{key}", f"unknown key; {hint}")


def _walk_table(raw, table: Table, path: str, issues: list[Issue], everything) -> dict:
    if not isinstance(raw, dict):
        issues.append(Issue(path.rstrip("."), f"expected a table, got {_describe(raw)}"))
        raw = {}
    out: dict = {}
    for key in raw:
        if key not in table.fields:
            issues.append(_unknown(key, path, table, everything))
    for key, node in table.fields.items():
        p = f"{path}{key}"
        present = key in raw
        value = raw.get(key)
        if isinstance(node, Table):
            out[key] = _walk_table(value if present else {}, node, p + ".", issues, everything)
        elif isinstance(node, TableList):
            if not present:
                out[key] = list(node.default or [])
            elif not isinstance(value, list):
                issues.append(Issue(p, f"expected an array of tables ([[{p}]]), got {_describe(value)}"))
                out[key] = []
            else:
                out[key] = [
                    _walk_table(v, node.table, f"{p}[{i}].", issues, everything)
                    for i, v in enumerate(value)
                ]
        elif isinstance(node, OpenTable):
            if not present:
                out[key] = {}
            elif not isinstance(value, dict):
                issues.append(Issue(p, f"expected a table, got {_describe(value)}"))
                out[key] = {}
            elif node.value is None:
                out[key] = dict(value)
            else:
                out[key] = {
                    k: check_field(node.value, v, f"{p}.{k}", issues) for k, v in value.items()
                }
        else:
            if not present:
                if node.required:
                    issues.append(Issue(p, "is required"))
                    out[key] = None
                else:  # defaults go through the same normalisation as user values (in base units)
                    out[key] = check_field(node, node.default, p, issues, bare=True)
            else:
                out[key] = check_field(node, value, p, issues)
    if not any(i.path.startswith(path) for i in issues):  # checks see only clean values
        for check in table.checks:
            for key, msg in check(out):
                issues.append(Issue(f"{path}{key}" if key else path.rstrip("."), msg))
    for given_check in table.given_checks:  # what was given is known even when a value is bad
        for key, msg in given_check(raw, out):
            issues.append(Issue(f"{path}{key}" if key else path.rstrip("."), msg))
    return out


def get_path(cfg: dict, dotted: str):
    """The value at ``a.b.c`` (``a.b[i].c``: inside the i-th table of an array), or None."""
    node = cfg
    for part in dotted.split("."):
        name, _, index = part.partition("[")
        if not isinstance(node, dict) or name not in node:
            return None
        node = node[name]
        if index:
            i = int(index.rstrip("]"))
            if not isinstance(node, list) or i >= len(node):
                return None
            node = node[i]
    return node


def _resolve_cycles(node: dict, table: Table, root: dict, path: str, issues: list[Issue]):
    """Turn ('time', seconds) placeholders into cycles using each field's clock key."""
    for key, sub in table.fields.items():
        value = node.get(key)
        if isinstance(sub, Table) and isinstance(value, dict):
            _resolve_cycles(value, sub, root, f"{path}{key}.", issues)
        elif isinstance(sub, TableList) and isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, dict):
                    _resolve_cycles(v, sub.table, root, f"{path}{key}[{i}].", issues)
        elif isinstance(sub, Field) and sub.kind == "cycles" and isinstance(value, tuple):
            clock = get_path(root, sub.clock) if sub.clock else None
            if not clock:
                need = sub.clock or "a clock"
                issues.append(Issue(f"{path}{key}", f"a time needs a clock; set {need} or give cycles"))
                node[key] = None
            else:
                node[key] = units.time_to_cycles(value[1], clock)

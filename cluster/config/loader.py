"""Load a TOML config, apply ``--set key.path=value`` overrides, validate, hash.

Every problem in a file is reported at once (``ConfigError`` lists them all, each with
its key path), and the CLI turns that into exit status 2 with no traceback.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import tomllib
from pathlib import Path

from cluster.config.schema import Field, Issue, Table, fill_presets, validate
from cluster.errors import UserError

COMMAND_LINE = "the command line"


class ConfigError(UserError):
    """One or more problems in a config; ``issues`` holds them all. ``given``: the key paths the
    command line (or a script's overrides: ``origin``) set, each with how it was given
    (``--set noc.k=0``, ``noc__k=0``): a problem at or under one is named by it, not by the file's name."""

    def __init__(self, source: str, issues: list[Issue], given: dict[str, str] | None = None,
                 origin: str = COMMAND_LINE):
        n = len(issues)
        lines = [_detail(i, given or {}) for i in issues]
        by_origin = sum(on for _, on in lines)
        if by_origin == n:
            source = origin
        elif by_origin:
            source = f"{source} and {origin}"
        super().__init__(f"{source}: {n} problem{'s' if n != 1 else ''} in the config", [line for line, _ in lines])
        self.issues = issues


def _detail(issue: Issue, given: dict[str, str]) -> tuple[str, bool]:
    """The line saying ``issue``, and whether the command line gave its key (it set that key,
    or a table holding it: the issue's own path follows)."""
    for key in sorted(given, key=len, reverse=True):  # the most specific key
        if issue.path == key:
            return f"{given[key]}: {issue.message}", True
        if issue.path.startswith((f"{key}.", f"{key}[")):
            return f"{given[key]}: {issue}", True
    return str(issue), False


def read_toml(path: str | Path) -> dict:
    p = Path(path)
    if not p.exists():
        raise UserError(f"config file {str(p)!r} does not exist")
    if p.is_dir():
        raise UserError(f"config path {str(p)!r} is a directory, not a TOML file")
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{p}: not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file") from None


def parse_override(text: str) -> tuple[str, object]:
    """'noc.k=8' -> ('noc.k', 8); values are TOML ('a', [1,2], true), else a bare string."""
    if "=" not in text:
        raise UserError(f"--set {text!r}: expected key.path=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise UserError(f"--set {text!r}: bad key path {key!r}")
    raw = raw.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


_ITEM = re.compile(r"^(.+)\[(\d+)\]$")  # key[i]: the i-th table of an array of tables


def set_path(cfg: dict, dotted: str, value) -> None:
    """Set ``a.b.c`` (or ``a.b[i].c`` inside an array of tables, e.g. system.network[0].size)."""
    node = cfg
    parts = dotted.split(".")
    for part in parts[:-1]:
        item = _ITEM.match(part)
        if item:
            name, i = item.group(1), int(item.group(2))
            tables = node.get(name)
            if not isinstance(tables, list) or i >= len(tables) or not isinstance(tables[i], dict):
                n = len(tables) if isinstance(tables, list) else 0
                raise ConfigError("overrides",
                                  [Issue(dotted, f"{name} has {n} table(s) here; [{i}] is not one of them")])
            node = tables[i]
            continue
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = value


def apply_overrides(raw: dict, overrides: list[tuple[str, object]]) -> dict:
    out = copy.deepcopy(raw)
    for key, value in overrides:
        set_path(out, key, value)
    return out


def resolve_files(raw: dict, table: Table, base_dir: Path) -> dict:
    """``raw`` with every relative file path (a ``Field(file=True)``) taken from ``base_dir``, the
    config file's directory, as a sweep's ``base`` is: a config names its traces beside it,
    wherever it is run from. Relative stays relative (``examples/`` + ``traces/t.csv``)."""
    out = dict(raw)
    fields = table.fields
    for key, value in raw.items():
        f = fields.get(key)
        if isinstance(f, Table) and isinstance(value, dict):
            out[key] = resolve_files(value, f, base_dir)
        else:
            out[key] = _from_dir(f, value, base_dir)
    return out


def _from_dir(f: object, value: object, base_dir: Path) -> object:
    """``value`` of key ``f``: taken from ``base_dir`` when ``f`` is a file key and it is a
    relative path; as it is otherwise."""
    if isinstance(f, Field) and f.file and isinstance(value, str) and value and not os.path.isabs(value):
        return os.path.normpath(base_dir / value)
    return value


def resolve_file_value(table: Table, path: str, value: object, base_dir: Path) -> object:
    """``value`` as set at dotted ``path`` (a sweep's axis, a --set): a relative file path (the key
    a ``Field(file=True)``) taken from ``base_dir``, as ``resolve_files`` takes a file's."""
    f: object = table
    for part in path.split("."):
        if not isinstance(f, Table) or part not in f.fields:
            return value
        f = f.fields[part]
    return _from_dir(f, value, base_dir)


def load(
    schema: Table,
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    extra: list[tuple[str, object]] | None = None,
    raw: dict | None = None,
    *,
    source: str | None = None,
    named: dict[str, str] | None = None,
    origin: str = COMMAND_LINE,
) -> dict:
    """Resolve a config: file (or ``raw``), then ``--set`` overrides, then ``extra``.

    ``extra`` carries the values of explicit command-line flags (``--k 8`` is
    ``('noc.k', 8)``), so a flag, ``--set`` and a file key all say the same thing. A file
    path the file names is taken from its directory; one given by ``--set`` from the
    working directory. Errors name the config ``source`` (default: the file) and each
    ``extra`` key as ``named`` says it was given (default: the key, as a flag's --help does),
    blaming ``origin`` for what only those set.
    """
    source = source or (str(path) if path else "command line")
    base = resolve_files(read_toml(path), schema, Path(path).parent) if path else copy.deepcopy(raw or {})
    sets = [(o, parse_override(o)) for o in (overrides or [])]
    pairs = [pair for _, pair in sets] + list(extra or [])
    # a preset the file names is filled in before the overrides (they may set its keys); validate fills
    # in one an override names
    merged = apply_overrides(fill_presets(base, schema), pairs)
    cfg, issues = validate(merged, schema)
    if issues:  # a key given twice is named by its last giver, as its value is
        given = {key: f"--set {text.strip()}" for text, (key, _) in sets}
        given.update({key: (named or {}).get(key, key) for key, _ in extra or []})  # a flag names its key in its --help
        raise ConfigError(source, issues, given, origin)
    return cfg


def config_hash(cfg: dict) -> str:
    """Stable 16-hex-digit hash of a resolved config (sorted-key JSON)."""
    text = json.dumps(cfg, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]

"""A config (or a sweep or explore spec) as a script hands it over: a file, TOML text or a dict,
and keys to override given as Python keywords or a mapping of dotted paths.

What a keyword names, in the order tried: the short name a command-line flag has
(``shards=2`` is ``run.shards``, cluster/config/short.py), a key path with ``__`` for each
dot (``memory__policy="virtual"`` is ``memory.policy``), or a table (``memory={"policy":
"virtual"}`` sets each key in it). A mapping's keys are dotted paths, as ``--set`` takes them
(``{"memory.policy": "virtual", "system.network[0].size": 4}``). Values are Python values,
checked as a file's are. A problem is named by the keyword or key that gave it.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.config.loader import load, read_toml
from cluster.config.schema import Table
from cluster.errors import UserError

ORIGIN = "the overrides"  # what a problem every override caused is blamed on


@dataclass(frozen=True)
class Document:
    """A TOML document as given: its tables, the directory its relative file paths start from, how
    errors name it, and its text (empty for a dict)."""

    raw: dict
    base_dir: Path
    source: str
    text: str = ""
    path: Path | None = None  # the file it was read from


def read_document(given: str | Path | Mapping[str, Any] | None, what: str = "config") -> Document:
    """A file (a ``Path``, or a string naming an existing file or with no ``=`` and no line break),
    TOML text (any other string) or a dict (copied). File paths in text or a dict are relative
    to the working directory; in a file, to the file's directory."""
    if given is None:
        return Document({}, Path("."), f"the {what}")
    if isinstance(given, Mapping):
        return Document(copy.deepcopy(dict(given)), Path("."), f"the {what} dict")
    if isinstance(given, str) and ("\n" in given or ("=" in given and not Path(given).is_file())):
        try:
            return Document(tomllib.loads(given), Path("."), f"the {what} text", given)
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"the {what} text: not valid TOML: {exc}") from None
    if isinstance(given, (str, Path)):
        p = Path(given)
        raw = read_toml(p)
        return Document(raw, p.parent, str(p), p.read_text(), p)
    raise TypeError(f"a {what} is a path, TOML text or a dict, not {type(given).__name__}")


def key_paths(overrides: Mapping[str, Any] | None, keywords: Mapping[str, Any],
              short: Mapping[str, str]) -> tuple[list[tuple[str, Any]], dict[str, str]]:
    """(dotted path, value) of every override, the mapping's first, and how each path was given."""
    pairs: list[tuple[str, Any]] = []
    named: dict[str, str] = {}

    def put(path: str, value: Any, how: str) -> None:
        if isinstance(value, Mapping):  # a table: each of its keys
            for k, v in value.items():
                put(f"{path}.{k}", v, how)
            return
        pairs.append((path, value))
        named[path] = how

    for key, value in (overrides or {}).items():
        put(str(key), value, f"{key}={value!r}")
    for word, value in keywords.items():
        put(short.get(word) or word.replace("__", "."), value, f"{word}={value!r}")
    return pairs, named


def load_args(config: str | Path | Mapping[str, Any] | None, overrides: Mapping[str, Any] | None,
              keywords: Mapping[str, Any], short: Mapping[str, str]) -> dict[str, Any]:
    """The arguments of ``loader.load`` (and ``config.map.resolve``) that resolve ``config`` (a file,
    TOML text, a dict or None), then ``overrides``, then ``keywords``, naming every problem by its
    key or by the override that set it."""
    doc = read_document(config)
    pairs, named = key_paths(overrides, keywords, short)
    return {"path": doc.path, "extra": pairs, "raw": doc.raw, "source": doc.source, "named": named, "origin": ORIGIN}


def load_config(schema: Table, config: str | Path | Mapping[str, Any] | None, overrides: Mapping[str, Any] | None,
                keywords: Mapping[str, Any], short: Mapping[str, str]) -> dict:
    """The resolved config (ConfigError listing every problem): ``load_args`` loaded against ``schema``."""
    return load(schema, **load_args(config, overrides, keywords, short))

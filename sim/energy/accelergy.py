"""A run's action counts in Accelergy's action-count format (YAML, written without PyYAML).

Accelergy (Wu, Emer, Sze, ICCAD 2019) reads ``action_counts`` files of this shape::

    action_counts:
      version: 0.3
      subtree:
      - name: rdasim_chip
        local:
        - name: mu
          action_counts:
          - name: read_byte
            counts: 56320

One ``local`` node per component, one entry per counted action, counts summed over every
unit of that component (the run's totals, not per instance). A user's architecture names
these components and an energy reference table prices these actions, so any energy model
Accelergy drives can price what rdasim counted.
"""

from __future__ import annotations

import re

VERSION = 0.3  # the action-count version Accelergy 0.3 and later read
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\[\]-]*$")


def action_counts_document(triples: list[tuple[str, str, int]], top: str = "rdasim_chip") -> dict:
    """The document as plain dicts and lists, from (component, action, count) triples."""
    local: dict[str, list[dict]] = {}
    for comp, action, count in triples:
        local.setdefault(comp, []).append({"name": action, "counts": int(count)})
    return {"action_counts": {"version": VERSION, "subtree": [
        {"name": top, "local": [{"name": c, "action_counts": acts} for c, acts in local.items()]}]}}


def to_yaml(node, indent: int = 0) -> str:
    """Block-style YAML of dicts, lists, strings, ints, floats and bools (keys in order)."""
    return "".join(_lines(node, indent))


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in ("true", "false", "null", "yes", "no", "on", "off"):
        return s
    return "'" + s.replace("'", "''") + "'"


def _lines(node, indent: int):
    pad = " " * indent
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, (dict, list)) and v:
                yield f"{pad}{_scalar(k)}:\n"
                yield from _lines(v, indent + 2)
            else:
                yield f"{pad}{_scalar(k)}: {_empty(v) if isinstance(v, (dict, list)) else _scalar(v)}\n"
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, dict) and item:
                first = True
                for line in _lines(item, indent + 2):
                    yield (pad + "- " + line[indent + 2:]) if first else line
                    first = False
            elif isinstance(item, list) and item:
                yield f"{pad}-\n"
                yield from _lines(item, indent + 2)
            else:
                yield f"{pad}- {_empty(item) if isinstance(item, (dict, list)) else _scalar(item)}\n"
    else:
        yield f"{pad}{_scalar(node)}\n"


def _empty(v) -> str:
    return "{}" if isinstance(v, dict) else "[]"

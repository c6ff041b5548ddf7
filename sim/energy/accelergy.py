"""A run's action counts and the energy table that prices them, in Accelergy's formats (YAML,
written without PyYAML).

Accelergy (Wu, Emer, Sze, ICCAD 2019; version 0.4) reads ``action_counts`` files of this shape::

    action_counts:
      version: '0.4'
      subtree:
      - name: rdasim_chip
        local:
        - name: mu
          action_counts:
          - name: read_byte
            counts: 56320

and energy reference tables (ERT) of this one, energies in pJ, one table per component named by
its full path in the action counts::

    ERT:
      version: '0.4'
      tables:
      - name: rdasim_chip.mu
        actions:
        - name: read_byte
          arguments: null
          energy: 1.25

One ``local`` node per component, one entry per counted action, counts summed over every
unit of that component (the run's totals, not per instance). The ERT is the run's own energy
table, so ``accelergy ERT.yaml action_counts.yaml -f energy_estimation`` prices the counts with
no hand-written file (and gives the run's energy; without ``-f energy_estimation`` Accelergy 0.4
also computes an area table and wants an architecture); another ERT, from any energy model
Accelergy drives, prices the same counts. The version is the string '0.4', as Accelergy 0.4 writes it (a number 0.4 is
not equal to its version string, and it warns that the file is outdated).
"""

from __future__ import annotations

import re

VERSION = "0.4"  # the file version Accelergy 0.4 reads and writes
TOP = "rdasim_chip"  # the design's root node
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\[\]-]*$")


def _by_component(rows) -> dict[str, list]:
    """{component: [entry, ...]} in first-seen order from (component, entry) pairs."""
    out: dict[str, list] = {}
    for comp, entry in rows:
        out.setdefault(comp, []).append(entry)
    return out


def action_counts_document(triples: list[tuple[str, str, int]], top: str = TOP) -> dict:
    """The action counts as plain dicts and lists, from (component, action, count) triples."""
    local = _by_component((c, {"name": a, "counts": int(n)}) for c, a, n in triples)
    return {"action_counts": {"version": VERSION, "subtree": [
        {"name": top, "local": [{"name": c, "action_counts": acts} for c, acts in local.items()]}]}}


def ert_document(triples: list[tuple[str, str, float]], top: str = TOP) -> dict:
    """The energy reference table, from (component, action, pJ per action) triples."""
    tables = _by_component((c, {"name": a, "arguments": None, "energy": float(pj)}) for c, a, pj in triples)
    return {"ERT": {"version": VERSION, "tables": [
        {"name": f"{top}.{c}", "actions": acts} for c, acts in tables.items()]}}


def accelergy_files(components: list[str], actions: list[str], counts: list[int],
                    pj: list[float]) -> dict[str, str]:
    """{file name: YAML text} of the action counts and the ERT pricing them (the run_energy
    table's columns), written side by side."""
    rows = list(zip(components, actions, counts, pj))
    return {"action_counts.yaml": to_yaml(action_counts_document([(c, a, n) for c, a, n, _ in rows])),
            "ERT.yaml": to_yaml(ert_document([(c, a, e) for c, a, _, e in rows]))}


def to_yaml(node, indent: int = 0) -> str:
    """Block-style YAML of dicts, lists, strings, ints, floats and bools (keys in order)."""
    return "".join(_lines(node, indent))


def _scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        return _float(v)
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


def _float(v: float) -> str:
    """A float YAML 1.1 readers (PyYAML) and 1.2 readers (ruamel) both read as a float: a
    mantissa with a point ("1.0e-05", not Python's "1e-05", which YAML 1.1 reads as a string)."""
    s = repr(v)
    if s in ("inf", "-inf", "nan"):
        return {"inf": ".inf", "-inf": "-.inf", "nan": ".nan"}[s]
    mantissa, e, exponent = s.partition("e")
    if e and "." not in mantissa:
        s = f"{mantissa}.0e{exponent}"
    return s

"""A study's sweep spec as TOML text: the base example and its explicit points (kept in DIR/specs/ and the
sweep's manifest, so every figure traces back to the spec that asked for it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster.evaluate.study import Study

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASES = Path(__file__).resolve().parent / "bases"  # bases no example needs
ANCHORS = "anchors"  # DIR/anchors: the anchor store every study's serve points share (one anchor simulated once)


def base_path(name: str) -> Path:
    """A study's base config: a file of cluster/evaluate/bases, else an example."""
    return BASES / name if (BASES / name).exists() else EXAMPLES / name


def sweep_name(study: Study, quick: bool) -> str:
    """The sweep's name: quick and full runs of a study are different sweeps and live side by side."""
    return f"{study.name}-quick" if quick else study.name


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string for the ASCII text used here
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def spec_text(study: Study, quick: bool) -> str:
    """The TOML of the study's sweep (command run, explicit points over its base example)."""
    lines = [f"# rdasim evaluate{' --quick' if quick else ''}: {study.title}",
             f"base = {json.dumps(str(base_path(study.base)))}", "",
             "[sweep]", f"name = {json.dumps(sweep_name(study, quick))}", 'command = "run"',
             f"description = {json.dumps(study.question)}",
             f"step_cache = {json.dumps(ANCHORS)}"]
    for point in study.points(quick):
        lines += ["", "[[points]]"] + [f"{path} = {_value(v)}" for path, v in point.items()]
    return "\n".join(lines) + "\n"

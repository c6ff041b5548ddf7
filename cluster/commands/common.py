"""Options every simulation command shares: the [run] section's flags, --set, JSON-safe values.

A flag is another way to write a config key, so the mapping flag -> key lives here once
and ``rdasim noc`` and ``rdasim run`` cannot disagree on what ``--shards`` means.
"""

from __future__ import annotations

import math

RUN_FLAGS = {"seed": "run.seed", "shards": "run.shards", "cut": "run.cut", "epoch": "run.epoch",
             "backend": "run.backend", "address": "run.address"}


def _shards(text: str):
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None


def add_run_arguments(p) -> None:
    p.add_argument("--seed", type=int, help="global random seed (run.seed)")
    p.add_argument("--shards", type=_shards, metavar="N|auto",
                   help="cut the grid into this many shards, or \"auto\": the count predicted fastest (run.shards)")
    p.add_argument("--cut", help="shard shape: rows, cols or blocks (run.cut)")
    p.add_argument("--epoch", type=int, metavar="CYCLES", help="cycles per lockstep epoch (run.epoch)")
    p.add_argument("--backend", help="local (in-process) or ray (one actor per shard)")
    p.add_argument("--address", help="Ray cluster address (default: an embedded local Ray)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override any config key (repeatable)")


def flag_values(args, flags: dict) -> list[tuple[str, object]]:
    """(config key, value) for every flag given on the command line."""
    return [(key, getattr(args, flag)) for flag, key in flags.items() if getattr(args, flag) is not None]


def json_safe(v):
    """numpy scalars to Python, NaN and infinities to null."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v

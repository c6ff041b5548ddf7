"""Options every simulation command shares: the [run] section's flags, --set, JSON-safe values.

A flag is another way to write a config key: the mapping flag -> key lives in
cluster/config/short.py once, so ``rdasim noc``, ``rdasim run`` and the Python API cannot
disagree on what ``--shards`` means.
"""

from __future__ import annotations

import json
import math
import sys

from cluster.errors import SaveError, UserError, WriteError


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
    p.add_argument("--backend", help="local (in-process) or ray (run.backend)")
    p.add_argument("--address", help="Ray cluster to join with --backend ray: auto, ray://host:10001 or host:6379 "
                                     "(run.address; default: $RAY_ADDRESS if set, else an embedded local Ray)")
    add_set_argument(p)


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


def add_set_argument(p) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override any config key, e.g. --set noc.vcs=2 (repeatable)")


def save(write, result_json: list[dict], printed: bool) -> list:
    """Run ``write()`` (which writes the result files and returns their paths). If it fails,
    the work is not lost: the result goes to stdout as JSON lines (unless ``printed`` already)
    and a one-line error names what could not be written."""
    try:
        return write()
    except (OSError, WriteError) as exc:
        raise not_saved(exc, result_json, printed) from None


def not_saved(exc: OSError | WriteError, result_json: list[dict], printed: bool) -> SaveError:
    """Print the result as JSON lines (unless ``printed`` already); the error to raise."""
    if not printed:
        for obj in result_json:
            print(json.dumps(obj))
    if isinstance(exc, WriteError):
        where, why = f" {exc.path}", exc.reason
    else:
        where, why = (f" {exc.filename}" if getattr(exc, "filename", None) else ""), exc.strerror or str(exc)
    return SaveError(f"could not write the results{where}: {why.lower()}; they are printed above as JSON")


def report_files(files) -> None:
    for f in files:
        print(f"wrote {f}", file=sys.stderr)


def add_existing_arguments(p, add: str, replace: str) -> None:
    """--add and --replace: what to do with results already in --out (the same words for runs and sweeps)."""
    p.add_argument("--add", action="store_true", help=add)
    p.add_argument("--replace", action="store_true", help=replace)


def existing(args) -> str:
    """'refuse', 'add' or 'replace' (cluster/results/layout.py EXISTING) from --add / --replace."""
    if args.add and args.replace:
        raise UserError("give --add or --replace, not both")
    return "add" if args.add else "replace" if args.replace else "refuse"


def add_run_out_arguments(p, tables: str) -> None:
    """--out DIR for a run's tables, and what to do when DIR holds another run's."""
    p.add_argument("--out", metavar="DIR", help=f"write the {tables} tables here, each a Parquet dataset "
                                               "DIR/<table>/ (docs/results.md)")
    add_existing_arguments(p, "--out holds another run's tables: keep them and add this run's (runs accumulate, "
                              "one run= partition each; side files in DIR/runs/<run id>/)",
                           "--out holds another run's tables: delete them and its side files first")


def prepare_out(args):
    """The run's --out (cluster/results/layout.py RunOutput), checked before the work: a bad one, or one holding
    another run's tables without --add or --replace, costs a second, not a run. None without --out."""
    from cluster.results import layout

    return layout.prepare(args.out, existing(args)) if args.out else None

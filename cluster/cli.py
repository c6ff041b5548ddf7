"""The ``rdasim`` command line: one subcommand per module in ``cluster/commands``.

Subcommand modules are imported only when used, so ``rdasim alloc`` never pays for
importing Ray and ``rdasim --help`` imports none. Each module defines ``add_arguments(parser)``
and ``run(args) -> int``; its one line of help is here, in ``SUBCOMMANDS``. A ``UserError``
anywhere becomes a message and exit status 2.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import importlib
import os
import sys
from collections.abc import Collection

from cluster.errors import EXIT_INTERRUPTED, Terminated, UserError

# name (a module under cluster.commands) -> its help: the one copy, kept here so that
# `rdasim --help` lists every command without importing one
SUBCOMMANDS = {
    "noc": "Cycle-level NoC simulation with synthetic traffic (latency/throughput)",
    "run": "Simulate a workload on the CU/MU grid with a memory policy",
    "alloc": "Allocation planning tools (static planner, reports)",
    "map": "DFModel-style mapping of a workload onto a system",
    "sweep": "Run a sweep of configs on Ray into a Parquet dataset",
    "explore": "Multi-objective design-space exploration (Optuna on Ray), trials stored as sweep points",
    "report": "Figures from a results directory",
    "compare": "Two runs or two sweep slices side by side, metric by metric with the ratio B / A",
    "evaluate": "The proposal's evaluation: every study a named sweep, into DIR/evaluation.md and its figures",
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises UserError (exit 2, one line) instead of printing usage noise, and
    matches flags exactly: a prefix is not taken for a flag (``--shard 2`` is not ``--shards 2``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UserError(f"{self.prog}: {message}{_did_you_mean(self, message)}")


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every flag of a parser and of its built subcommands (an unknown flag is reported by the top parser)."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _flags(sub)
    return found


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """" (did you mean --x?)" for each unknown flag of an "unrecognized arguments" error near a known one."""
    prefix = "unrecognized arguments: "
    if not message.startswith(prefix):
        return ""
    known = sorted(_flags(parser))
    hints = []
    for word in message[len(prefix):].split():
        flag = word.split("=", 1)[0]
        if flag.startswith("-"):
            close = difflib.get_close_matches(flag if flag.startswith("--") else "-" + flag, known, n=1, cutoff=0.6)
            if close:
                hints.append(f"{flag}: did you mean {close[0]}?")
    return f" ({'; '.join(hints)})" if hints else ""


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; only the named subcommands' arguments are built (their modules imported), all if None."""
    parser = _Parser(prog="rdasim", description="rdasim: simulator for dynamic on-chip memory on RDAs",
                     epilog="exit status: 0 ok; 1 internal error or results not written; 2 bad input (nothing ran); "
                            "3 sweep with failed points; 4/5/6 run deadlocked/cut off/failed; 7 map infeasible or "
                            "alloc plan does not fit; 130 interrupted; 143 terminated")
    parser.add_argument("--version", action="version", version=f"rdasim {_version()}",
                        help="print the version (and the git commit of a checkout) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if commands is None or name in commands:
            _load(name).add_arguments(p)
    return parser


def _version() -> str:
    from cluster.version import code_version

    v = code_version()
    if v.commit is None:
        return v.version
    return f"{v.version} (commit {v.commit[:12]}{', with uncommitted changes' if v.dirty else ''})"


def _load(name: str):
    return importlib.import_module(f"cluster.commands.{name}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only build the chosen subcommand's arguments, none for `rdasim --help` (cheap start-up).
    first = next((a for a in argv if not a.startswith("-")), None)
    try:
        parser = build_parser([first] if first in SUBCOMMANDS else [])
        if not argv:
            parser.print_help()
            return 0
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        return int(_load(args.command).run(args) or 0)
    except UserError as err:
        print(err.render(), file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated as stop:
        print(f"terminated (signal {stop.signum})", file=sys.stderr)
        return stop.exit_status
    except BrokenPipeError:  # `rdasim ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def console() -> None:
    """The ``rdasim`` command: ``main`` and the process's exit status. The results are written by
    then, so Ray is stopped (or the cluster left) at once, not by Ray's exit hook, which sleeps
    0.5 s first for log lines rdasim does not print, and the objects left are frozen rather than
    collected one by one as the interpreter exits (0.4 s after a run's simulation). Here, not in
    ``main``: a script or test calling ``main`` keeps its Ray."""
    status = main()
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    console()

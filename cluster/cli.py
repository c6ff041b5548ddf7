"""The ``rdasim`` command line: one subcommand per module in ``cluster/commands``.

Subcommand modules are imported only when used, so ``rdasim alloc`` never pays for
importing Ray. Each module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. A ``UserError`` anywhere becomes a message and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from cluster.errors import EXIT_INTERRUPTED, UserError

# name -> module under cluster.commands (kept here so `rdasim --help` lists them all)
SUBCOMMANDS = {
    "noc": "Cycle-level NoC simulation with synthetic traffic (latency/throughput)",
    "run": "Simulate a workload on the CU/MU grid with a memory policy",
    "alloc": "Allocation planning tools (static planner, reports)",
    "map": "DFModel-style mapping of a workload onto a system",
    "sweep": "Run a sweep of configs on Ray into a Parquet dataset",
    "report": "Figures from a results directory",
}


class _Parser(argparse.ArgumentParser):
    """argparse that raises UserError (exit 2, one line) instead of printing usage noise."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise UserError(f"{self.prog}: {message}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="rdasim", description="rdasim: simulator for dynamic on-chip memory on RDAs",
                     epilog="exit status: 0 ok; 1 internal error or results not written; 2 bad input (nothing ran); "
                            "3 sweep with failed points; 4/5/6 run deadlocked/cut off/failed; 7 map infeasible or "
                            "alloc plan does not fit; 130 interrupted")
    parser.add_argument("--version", action="version", version=f"rdasim {_version()}",
                        help="print the version (and the git commit of a checkout) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, help_text in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or only == name:
            module = _load(name)
            if module is not None:
                module.add_arguments(p)
    return parser


def _version() -> str:
    from cluster.version import code_version

    v = code_version()
    if v.commit is None:
        return v.version
    return f"{v.version} (commit {v.commit[:12]}{', with uncommitted changes' if v.dirty else ''})"


def _load(name: str):
    try:
        return importlib.import_module(f"cluster.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"cluster.commands.{name}":
            return None
        raise


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only build the chosen subcommand's arguments (cheap start-up).
    first = next((a for a in argv if not a.startswith("-")), None)
    only = first if first in SUBCOMMANDS else None
    try:
        parser = build_parser(only)
        if not argv:
            parser.print_help()
            return 0
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        module = _load(args.command)
        if module is None:
            raise UserError(f"'rdasim {args.command}' is not available in this build")
        return int(module.run(args) or 0)
    except UserError as err:
        print(err.render(), file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `rdasim ... | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

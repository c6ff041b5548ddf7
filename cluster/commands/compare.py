"""rdasim compare: two runs or two sweep slices metric by metric with the ratio B / A, printed and drawn."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("a", metavar="DIR_A", help="results of side A: rdasim run/noc --out DIR, or a sweep's --out DIR")
    p.add_argument("b", metavar="DIR_B", nargs="?",
                   help="results of side B (default: DIR_A, for two slices of one sweep with --where-a and --where-b)")
    p.add_argument("--where-a", action="append", default=[], metavar="AXIS=VALUE",
                   help="side A's rows of a sweep: those with this value, e.g. memory.policy=virtual (repeatable)")
    p.add_argument("--where-b", action="append", default=[], metavar="AXIS=VALUE",
                   help="side B's rows of a sweep: those with this value (repeatable)")
    p.add_argument("--metric", action="append", default=[], metavar="COLUMN",
                   help="a metric column to compare (repeatable; default: the headline ones either side has)")
    p.add_argument("--out", metavar="DIR", help="where the figure goes, as PNG and PDF (default: DIR_A/_figures)")
    p.add_argument("--no-figure", action="store_true", help="print the table only")


def run(args) -> int:
    from pathlib import Path

    from cluster.report import compare
    from cluster.results import io

    if args.b is None and not (args.where_a or args.where_b):
        from cluster.errors import UserError

        raise UserError("compare: give DIR_B, or --where-a and --where-b for two slices of the sweep in DIR_A")
    result = compare.compare(args.a, args.b, where_a=args.where_a, where_b=args.where_b, metrics=args.metric or None)
    print(result.text())
    if not args.no_figure:
        out = Path(args.out) if args.out else Path(args.a) / "_figures"
        io.check_dir(out, "--out" if args.out else "the figures directory (--out)")
        for path in compare.write(result, out):
            print(f"wrote {path}", file=sys.stderr)
    return 0

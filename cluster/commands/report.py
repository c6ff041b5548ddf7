"""rdasim report: PNG figures from a results directory (a run's --out, or a sweep's --out)."""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("dir", metavar="RESULTS", help="results: rdasim noc/run --out DIR, or rdasim sweep --out DIR")
    p.add_argument("--out", metavar="DIR", help="where the figures go, as PNG, PDF and SVG (default: RESULTS/_figures)")
    p.add_argument("--x", action="append", default=[], metavar="AXIS",
                   help="sweeps: swept column to plot against, e.g. noc_rate (repeatable; default: every varied one)")
    p.add_argument("--y", action="append", default=[], metavar="METRIC",
                   help="sweeps: metric column, e.g. avg_latency (repeatable; default: a few headline ones)")
    p.add_argument("--hue", metavar="AXIS", help="sweeps: one line per value of this swept column")
    p.add_argument("--point", metavar="POINT_ID", help="sweeps: the point whose own tables are drawn")
    p.add_argument("--formats", default="png,pdf", metavar="LIST",
                   help="files of each figure, comma-separated: png, pdf, svg (default: png,pdf)")
    p.add_argument("--quiet", action="store_true", help="no summary line on stderr (the figures skipped are listed in "
                                                        "OUT/skipped.txt)")


def run(args) -> int:
    from cluster.errors import UserError
    from cluster.report.render import FORMATS, Options, default_out, write_report
    from cluster.results import io

    out = args.out or default_out(args.dir)
    io.check_dir(out, "--out" if args.out else "the figures directory (--out)")
    formats = tuple(f.strip().lower() for f in args.formats.split(",") if f.strip())
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise UserError(f"--formats {args.formats!r}: expected png, pdf or svg, comma-separated")
    report = write_report(args.dir, out, Options(args.x, args.y, args.hue, args.point, formats))
    for path in report.written:
        print(path)
    for note in report.notes:  # what was asked and could not be drawn everywhere: said even with --quiet
        print(note, file=sys.stderr)
    if not args.quiet:
        print(report.line(out), file=sys.stderr)
    return 0

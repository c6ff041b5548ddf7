"""rdasim sweep: run a sweep spec on Ray into a Parquet dataset; `rdasim sweep status DIR` reports on it,
`rdasim sweep compact DIR` rewrites its point files into few large ones."""

from __future__ import annotations

import json
import sys

from cluster.commands.common import add_existing_arguments, existing
from cluster.errors import EXIT_POINTS_FAILED, TerminationSignal, UserError

DEFAULT_OUT = "results"


def add_arguments(p) -> None:
    p.add_argument("target", nargs="+", metavar="SPEC.toml | status DIR | compact DIR",
                   help="a sweep spec to run, `status DIR` to summarise the sweeps in DIR, or `compact DIR` to "
                        "rewrite their point files into files of --rows rows")
    p.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                   help=f"output directory; the dataset goes to DIR/<sweep name>/ (default: {DEFAULT_OUT})")
    p.add_argument("--address", metavar="ADDR",
                   help="Ray cluster to join: auto, ray://host:10001 or host:6379 "
                        "(default: $RAY_ADDRESS if set, else an embedded local Ray)")
    p.add_argument("--max-concurrency", dest="max_concurrency", type=int, metavar="N",
                   help="points in flight at once (default: [sweep] max_concurrency, else twice what the CPUs hold)")
    p.add_argument("--retry-failed", dest="retry_failed", action="store_true",
                   help="also rerun points stored as errors (finished points are always skipped)")
    p.add_argument("--in-process", dest="in_process", action="store_true",
                   help="run the points one by one in this process, without Ray (debugging)")
    add_existing_arguments(p, "the sweep in --out came from another version of the spec: add this version's points "
                              "to it", "delete the sweep's stored points (its tables and manifest in --out) and start "
                                       "again")
    p.add_argument("--mix-code", dest="mix_code", action="store_true",
                   help="continue a sweep whose stored points another version of rdasim computed")
    p.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="check the spec and every point as the run would (nothing runs), and list the points")
    p.add_argument("--compact", choices=("auto", "always", "never"),
                   help="when the run finishes, rewrite each table's point files into files of [sweep] compact_rows "
                        "rows: auto (once a table holds 1,000 point files), always, never (default: [sweep] compact, "
                        "else auto)")
    p.add_argument("--rows", type=int, metavar="N",
                   help="compact: rows of a compacted file (default 100000; a point's rows are never split)")
    p.add_argument("--json", action="store_true", help="status, compact: print JSON")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def run(args) -> int:
    if args.target[0] == "status":
        if len(args.target) != 2:
            raise UserError("usage: rdasim sweep status DIR [--json]")
        return _status(args.target[1], args.json)
    if args.target[0] == "compact":
        if len(args.target) != 2:
            raise UserError("usage: rdasim sweep compact DIR [--rows N] [--json]")
        return _compact(args.target[1], args.rows, args.json, args.quiet)
    if len(args.target) != 1:
        raise UserError(f"expected one spec file, got {' '.join(args.target)}")
    if args.max_concurrency is not None and args.max_concurrency < 1:
        raise UserError("--max-concurrency must be at least 1")
    from cluster.sweep.plan import plan_sweep

    plan = plan_sweep(args.target[0])
    if not args.dry_run:
        from cluster.results import io

        io.check_dir(args.out)  # before Ray starts: a bad --out costs a second
    if args.dry_run:
        from cluster.sweep.plan import check_points

        check_points(plan)
        for line in plan.notes:
            print(line, file=sys.stderr)
        try:
            for p in plan.points:
                print(json.dumps({"index": p.index, "point_id": p.id, **p.values}, default=str))
        except BrokenPipeError:  # `| head`
            sys.stderr.close()
        return 0
    from cluster.sweep.runner import run_sweep

    with TerminationSignal().installed():  # `ray job stop`, kill: record the run as interrupted, exit 143
        summary = run_sweep(plan, args.out, args.address, args.max_concurrency, args.quiet, args.retry_failed,
                            args.in_process, existing(args), args.mix_code, args.compact)
    if not args.quiet:
        print(f"{summary.name}: {summary.total} points ({summary.skipped} already stored, {summary.computed} run) "
              f"in {summary.seconds:.1f} s -> {summary.dataset}\n  {summary.outcomes.line()}", file=sys.stderr)
    incomplete = summary.outcomes.incomplete or summary.failed
    if incomplete and not args.quiet:
        print(f"  {incomplete} point{'s' if incomplete > 1 else ''} did not complete (exit status 3): "
              f"`rdasim sweep status {args.out}` lists them", file=sys.stderr)
    return EXIT_POINTS_FAILED if incomplete else 0



def _status(path: str, as_json: bool) -> int:
    from cluster.sweep.outcomes import Outcomes
    from cluster.sweep.status import statuses

    found = statuses(path)
    if as_json:
        if len(found) == 1:
            print(json.dumps(found[0].to_json()))
        else:
            totals = {k: sum(getattr(s, k) for s in found) for k in ("total", "done", "failed", "pending")}
            outcomes = {k: sum(s.outcomes.get(k, 0) for s in found) for k in found[0].outcomes}
            print(json.dumps({**totals, "outcomes": outcomes, "sweeps": [s.to_json() for s in found]}))
        return 0
    # stored: points with a file; errors: of which error rows (the job raised); outcomes below say how the runs ended
    print(f"{'sweep':<24} {'command':<8} {'stored':>7} {'errors':>7} {'pending':>8} {'total':>7}  state")
    for s in found:
        print(f"{s.sweep:<24} {s.command:<8} {s.done:>7} {s.failed:>7} {s.pending:>8} {s.total:>7}  {s.state}")
        ended = Outcomes(s.outcomes, s.points)
        print(f"    {ended.line()}")
        for line in ended.listing():
            print(f"    {line}")
        if s.specs > 1:
            print(f"    points of {s.specs} spec versions (--add): the sweep_spec column tells them apart")
        if len(s.code or []) > 1:
            print(f"    computed by {len(s.code)} code versions (--mix-code): {', '.join(s.code)}")
        if s.stray:
            print(f"    {s.stray} file(s) in {s.dataset} belong to no point of this sweep (not counted)")
        if s.rebuilt:
            print(f"    {s.rebuilt}")
        if s.finished:
            print(f"    finished an interrupted compaction first ({s.finished} file(s) put in place)")
        for f in s.unreadable:
            print(f"    {f}: cannot be read (not a whole Parquet file): its point is pending, a rerun recomputes it")
        for e in s.errors:
            print(f"    {e}")
    return 0


def _compact(path: str, rows: int | None, as_json: bool, quiet: bool) -> int:
    from cluster.sweep.compact import ROWS, compact

    if rows is not None and rows < 1:
        raise UserError(f"--rows must be at least 1, got {rows}")
    for done in compact(path, rows or ROWS):
        if as_json:
            print(json.dumps(done.to_json()))
        elif not quiet:
            print(done.describe())
    return 0

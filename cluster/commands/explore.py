"""rdasim explore: a multi-objective design-space exploration on Ray, its trials stored as a sweep's points."""

from __future__ import annotations

import json
import sys

from cluster.errors import TerminationSignal, UserError

DEFAULT_OUT = "results"


def add_arguments(p) -> None:
    p.add_argument("spec", metavar="SPEC.toml", help="an explore spec: a base config and [explore]")
    p.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                   help=f"output directory: DIR/trials/ (one row per trial run), DIR/pareto.parquet "
                        f"(default: {DEFAULT_OUT})")
    p.add_argument("--budget", type=int, metavar="N",
                   help="trials in all, those already in DIR included (default: [explore] budget); a larger one "
                        "continues a finished exploration")
    p.add_argument("--optimizer", metavar="NAME", help="random, grid, tpe, gp or nsga2 (default: [explore] optimizer)")
    p.add_argument("--seed", type=int, metavar="N", help="optimiser seed (default: [explore] seed)")
    p.add_argument("--parallel", type=int, metavar="N", help="trials in flight on Ray (default: [explore] parallel)")
    p.add_argument("--address", metavar="ADDR",
                   help="Ray cluster to join: auto, ray://host:10001 or host:6379 "
                        "(default: $RAY_ADDRESS if set, else an embedded local Ray)")
    p.add_argument("--in-process", dest="in_process", action="store_true",
                   help="run the trials one by one in this process, without Ray (debugging, small spaces)")
    p.add_argument("--replace", action="store_true", help="delete the exploration stored in DIR and start again")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: trials (and how they ended), objectives, reference, hypervolume "
                        "(raw and normalised) and the Pareto front")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def run(args) -> int:
    from cluster.explore.driver import Options, run_explore
    from cluster.explore.spec import read_explore
    from cluster.results import io

    if args.budget is not None and args.budget < 1:
        raise UserError(f"--budget must be at least 1 trial, got {args.budget}")
    if args.parallel is not None and args.parallel < 1:
        raise UserError(f"--parallel must be at least 1, got {args.parallel}")
    spec = read_explore(args.spec)
    io.check_dir(args.out)  # before Ray starts
    with TerminationSignal().installed():  # record the trials' run as interrupted, exit 143
        summary = run_explore(spec, args.out, Options(args.budget, args.optimizer, args.seed, args.parallel,
                                                      args.address, args.in_process, args.replace,
                                                      args.quiet or args.json))
    front = summary.front
    if args.json:
        print(json.dumps({**front.to_json(), "ended": dict(summary.trials)}, default=str))
    elif not args.quiet:
        print("\n".join(summary.lines(spec)), file=sys.stderr)
    return 0



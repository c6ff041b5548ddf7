"""rdasim evaluate: the research proposal's evaluation, every study a named sweep, into DIR/evaluation.md."""

from __future__ import annotations

import shlex
import signal
import sys
import time
from pathlib import Path

from cluster.errors import EXIT_POINTS_FAILED, UserError

DEFAULT_OUT = "evaluation"


def add_arguments(p) -> None:
    from cluster.evaluate.studies import STUDIES

    p.add_argument("--quick", action="store_true",
                   help="smaller points (a 10 s serving window, fewer cases): about 15 minutes on 2 cores")
    p.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                   help=f"where the sweeps, DIR/evaluation.md and DIR/figures/ go (default: {DEFAULT_OUT}); "
                        "run again to resume: stored points are not run twice")
    p.add_argument("--address", metavar="ADDR",
                   help="Ray cluster to join: auto, ray://host:10001 or host:6379 "
                        "(default: $RAY_ADDRESS if set, else an embedded local Ray)")
    p.add_argument("--only", action="append", choices=list(STUDIES), metavar="STUDY",
                   help=f"run only this study (repeatable): {', '.join(STUDIES)}")
    p.add_argument("--in-process", dest="in_process", action="store_true",
                   help="run the points one by one in this process, without Ray")
    p.add_argument("--mix-code", dest="mix_code", action="store_true",
                   help="continue studies whose stored points another version of rdasim computed")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def run(args) -> int:
    from cluster.evaluate.figures import draw
    from cluster.evaluate.report import Done, write
    from cluster.evaluate.run import run_study
    from cluster.evaluate.studies import STUDIES
    from cluster.results import io

    out = Path(args.out)
    io.check_dir(out)  # before Ray starts
    if (out / "evaluation.md").exists() and not (out / "evaluation.json").exists():
        raise UserError(f"--out {out}: holds an evaluation.md that no rdasim evaluate wrote (no evaluation.json "
                        "beside it): give another directory")
    signal.signal(signal.SIGTERM, _terminate)
    chosen = [STUDIES[n] for n in STUDIES if not args.only or n in args.only]
    start = time.perf_counter()
    done, errors = [], 0
    for study in chosen:
        if study.runner is not None:
            result = study.runner(study, out, args.quick, args.address, args.in_process, args.quiet)
        else:
            result = run_study(study, out, args.quick, args.address, args.in_process, args.quiet, args.mix_code)
        errors += sum(map(_crashed, result.rows))
        done.append(Done(result, study.judge(result.rows), draw(result, out / "figures")))
    command = "rdasim evaluate" + "".join(f" {shlex.quote(a)}" for a in sys.argv[2:]) if sys.argv[1:2] == [
        "evaluate"] else "rdasim evaluate" + (" --quick" if args.quick else "")
    target = write(done, out, command, time.perf_counter() - start)
    if not args.quiet:
        held = sum(c.holds for d in done for c in d.checks)
        total = sum(len(d.checks) for d in done)
        print(f"evaluate: {len(done)} studies, {held} of {total} checks hold -> {target}", file=sys.stderr)
    return EXIT_POINTS_FAILED if errors else 0


FINDINGS = ("ConfigError", "BufferRefused")  # a point stopped by what the chip cannot hold, not by a fault


def _crashed(row) -> bool:
    """A point that raised something other than a refusal for lack of room. A deadlocked run, one refused
    before running because what it asks does not fit the chip (ConfigError), or one stopped when an MU
    refused a buffer it cannot go on without (BufferRefused) is a finding its study reports; any other
    exception is a fault of rdasim's, and the command's exit status says so."""
    return row.get("point_status") == "error" and not str(row.get("point_error") or "").startswith(FINDINGS)


def _terminate(signum, frame):  # noqa: ARG001 - signal handler signature
    raise SystemExit(128 + signum)

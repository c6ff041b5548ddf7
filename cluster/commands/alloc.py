"""``rdasim alloc``: allocation tools: the static lifetime-aware planner, memory reports of a trace."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from allocators.banks import MEMORY_KINDS, BankAllocator
from allocators.dsa_csv import format_csv, read_csv
from allocators.errors import InputError, NoPlacementError
from allocators.planner import METHODS, plan
from allocators.trace import parse_trace, replay
from cluster.commands.common import report_files, save
from cluster.config.units import UnitError, parse_size, parse_time
from cluster.errors import EXIT_NO_ANSWER, UserError
from cluster.results import io
from cluster.results.alloc_reports import write_reports
from cluster.results.io import write_text
from cluster.results.schemas import RunMeta


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="alloc_command", metavar="ACTION")
    p = sub.add_parser("plan", help="place the buffers of a MiniMalloc CSV (id,lower,upper,size[,alignment])",
                       description="Place every buffer of a MiniMalloc CSV so that no two buffers live at the "
                                   "same time share an address; report the peak against the lower bound.")
    p.add_argument("file", metavar="FILE.csv", help="buffers: id,lower,upper,size[,alignment[,offset]]")
    p.add_argument("--capacity", help="memory size the packing must fit, e.g. 1MiB or 1048576")
    p.add_argument("--method", choices=METHODS, default="exact", help="planner (default: exact)")
    p.add_argument("--budget", default="10s", help="time budget of the exact search, e.g. 60 or 60s (default 10s); "
                                                   "when it runs out the best plan found is printed, marked not proven")
    p.add_argument("--out", metavar="OFFSETS.csv", help="write the buffers with their offsets (MiniMalloc CSV)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    r = sub.add_parser("report", help="replay an allocation trace on lockstep banks and write the memory reports",
                       description="Replay TRACE.csv (op,memory,id,size[,top_down]; ops alloc, free, cb, "
                                   "clear_cbs) on the declared memories and write tt-metal-style memory reports "
                                   "(CSV and Parquet). Stops at the first failing step and reports that state.")
    r.add_argument("trace", metavar="TRACE.csv", help="steps: op,memory,id,size[,top_down]")
    r.add_argument("--memory", action="append", required=True, metavar="NAME=KIND:BANKS:BANK_SIZE[:ALIGN[:RESERVED]]",
                   help="declare a memory, e.g. L1=l1:64:1MiB:16:100KiB or DRAM=dram:12:1GiB:32 (repeatable)")
    r.add_argument("--out", required=True, metavar="DIR", help="directory for the report files")


def run(args) -> int:
    action = getattr(args, "alloc_command", None)
    if action == "report":
        return _report(args)
    if action != "plan":
        raise UserError("rdasim alloc: give an action, 'plan' or 'report' (see rdasim alloc --help)")
    capacity = _option(parse_size, args.capacity, "--capacity") if args.capacity is not None else None
    budget = _option(_seconds, args.budget, "--budget")
    if budget <= 0:
        raise UserError(f"--budget must be positive, got {args.budget!r}")
    if args.out:
        io.check_file(args.out, "--out")  # before the work: a bad --out costs a second, not a search
    try:
        problem, _ = read_csv(args.file)
    except FileNotFoundError:
        raise UserError(f"{args.file}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{args.file}: is a directory, expected a CSV file") from None
    except UnicodeDecodeError:
        raise UserError(f"{args.file}: not a text (UTF-8) CSV file") from None
    except InputError as err:
        raise UserError(f"{args.file}: {err}") from None
    progress = None if args.quiet else (lambda message: print(f"  {message}", file=sys.stderr))
    try:
        result = plan(problem, args.method, capacity, budget, progress)
    except (InputError, NoPlacementError) as err:
        raise UserError(f"{args.file}: {err}") from None
    if args.json:
        print(json.dumps(result.summary()))
    else:
        print(_table(result))
    if args.out:
        report_files([save(lambda: write_text(format_csv(problem, result.offsets), args.out),
                           [result.summary()], printed=args.json)])
    for problem_text in result.problems[:10]:
        print(f"invalid placement: {problem_text}", file=sys.stderr)
    if not result.valid:
        return EXIT_NO_ANSWER
    if not result.fits:
        print(f"does not fit: peak {result.peak} B > capacity {capacity} B", file=sys.stderr)
        return EXIT_NO_ANSWER
    return 0


def _report(args) -> int:
    memories = dict(_memory(spec) for spec in args.memory)
    io.check_dir(args.out)
    try:
        text = Path(args.trace).read_text()
        steps = parse_trace(text, set(memories))
    except (FileNotFoundError, IsADirectoryError):
        raise UserError(f"{args.trace}: no such file") from None
    except UnicodeDecodeError:
        raise UserError(f"{args.trace}: not a text (UTF-8) CSV file") from None
    except InputError as err:
        raise UserError(f"{args.trace}: {err}") from None
    result = replay(steps, memories)
    digest = hashlib.sha256("\n".join([text, *args.memory]).encode()).hexdigest()[:16]
    meta = RunMeta(run_id=f"alloc-report-{digest}", config_hash=digest, seed=0)
    for path in save(lambda: write_reports(memories, args.out, meta), [], printed=True):
        print(path)
    if result.failed is not None:
        print(f"{args.trace}: line {result.failed.line}: {result.failed.op} failed: {result.error} "
              f"(reports show the state before this step)", file=sys.stderr)
        return EXIT_NO_ANSWER
    return 0


def _memory(spec: str) -> tuple[str, BankAllocator]:
    """NAME=KIND:BANKS:BANK_SIZE[:ALIGN[:RESERVED]] -> (name, allocator)."""
    name, _, rest = spec.partition("=")
    parts = rest.split(":")
    if not name or not 3 <= len(parts) <= 5:
        raise UserError(f"--memory {spec!r}: expected NAME=KIND:BANKS:BANK_SIZE[:ALIGN[:RESERVED]]")
    kind = parts[0].lower()
    if kind not in MEMORY_KINDS:
        raise UserError(f"--memory {spec!r}: kind {kind!r} is not one of {', '.join(MEMORY_KINDS)}")
    try:
        banks = int(parts[1])
        bank_size, align, reserved = (parse_size(p) for p in (parts[2:] + ["32", "0"][len(parts) - 3:]))
        return name, BankAllocator(kind, banks, bank_size, align, reserved)
    except (UnitError, ValueError, InputError) as err:
        raise UserError(f"--memory {spec!r}: {err}") from None


def _option(parse, text: str, name: str):
    try:
        return parse(text)
    except (UnitError, ValueError) as err:
        raise UserError(f"{name}: {err}") from None


def _seconds(text: str) -> float:
    """Seconds from "60" (a plain number) or "60s", "2.5s", "500ms"."""
    try:
        return float(text)
    except ValueError:
        return parse_time(text)


def _table(result) -> str:
    rows = [
        ("method", result.method),
        ("buffers", str(len(result.offsets))),
        ("peak", f"{result.peak:,} B"),
        ("lower bound", f"{result.lower_bound:,} B (max bytes live at once)"),
        ("ratio", f"{result.ratio:.4f}"),
        ("proved optimal", "yes" if result.proved_optimal else "no"),
        ("capacity", "none" if result.capacity is None
         else f"{result.capacity:,} B ({'fits' if result.fits else 'DOES NOT FIT'})"),
        ("valid", "yes" if result.valid else "NO"),
        ("seconds", f"{result.seconds:.3f}"),
    ]
    if result.method == "exact":
        rows.append(("search nodes", f"{result.nodes:,}"))
    if result.note:
        rows.append(("note", result.note))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)

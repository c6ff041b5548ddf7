"""rdasim noc: latency/throughput of the cycle-level NoC under synthetic traffic."""

from __future__ import annotations

import argparse
import json
import sys

from cluster.commands import common
from cluster.commands.common import add_run_arguments, flag_values, json_safe, report_files, save
from cluster.config import load, short
from cluster.config.noc import NOC_SCHEMA
from cluster.parallel.distribution import describe_distribution, distributed

FLAGS = short.NOC  # command-line flag -> config key (every flag is also a key, so a file and --set say the same)

JSON_KEYS = ("rate", "avg_latency", "p50_latency", "p99_latency", "offered", "accepted", "avg_hops",
             "saturated", "sim_cycles", "epochs", "wall_seconds", "result_hash", "measured_packets",
             "avg_network_latency", "max_latency", "littles_law_error", "flits_in_network", "max_source_backlog",
             "topology", "rows", "cols", "traffic", "shards", "backend", "lookahead")


def _rates(text: str) -> list[float]:
    items = text.split(",")
    empty = [i for i, x in enumerate(items, 1) if not x.strip()]
    if empty and len(items) > 1:  # "0.1,,0.3" is a typo, not two loads
        which = f"item {empty[0]} of {len(items)} is" if len(empty) == 1 else \
            f"items {', '.join(map(str, empty))} of {len(items)} are"
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}: {which} empty")
    try:
        rates = [float(x) for x in items if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not rates:
        raise argparse.ArgumentTypeError(f"expected at least one offered load, got {text!r}")
    return rates


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="TOML config file (sections [noc] and [run])")
    p.add_argument("--k", type=int, help="k x k grid (noc.k)")
    p.add_argument("--rows", type=int, help="router rows (noc.rows; default 8)")
    p.add_argument("--cols", type=int, help="router columns (noc.cols; default 8)")
    p.add_argument("--topology", help="mesh or torus (noc.topology)")
    p.add_argument("--traffic", help="uniform, transpose, bitcomp, neighbor or hotspot (noc.traffic)")
    p.add_argument("--rate", type=float, metavar="FLITS_PER_NODE_CYCLE", help="one offered load, > 0 (noc.rate)")
    p.add_argument("--rates", type=_rates, metavar="R1,R2,...",
                   help="offered loads of a latency/throughput curve (noc.rates; default: BookSim2's reference curve)")
    p.add_argument("--packet-flits", dest="packet_flits", type=int, help="flits per packet (noc.packet_flits)")
    p.add_argument("--vcs", type=int, help="virtual channels per port (noc.vcs)")
    p.add_argument("--vc-buffers", dest="vc_buffers", type=int,
                   help="flit buffers per virtual channel (noc.vc_buffers)")
    p.add_argument("--link-latency", dest="link_latency", type=int, help="link latency, cycles (noc.link_latency)")
    add_run_arguments(p)
    common.add_run_out_arguments(p, "noc_summary and noc_links")
    p.add_argument("--json", action="store_true", help="print one JSON object per offered load")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def run(args) -> int:
    cfg = load(NOC_SCHEMA, args.config, args.overrides, flag_values(args, FLAGS))
    out = common.prepare_out(args)  # before the work
    from cluster.jobs.noc import run_noc  # imported late: keeps `rdasim noc --help` instant

    result = run_noc(cfg, quiet=args.quiet or args.json)
    loads = result.summary["loads"]
    rows = [{**{k: json_safe(row[k]) for k in JSON_KEYS}, **distributed(row)} for row in loads]
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        _table(loads)
        for row in loads:
            line = describe_distribution(row)
            if line:
                print(f"  rate {row['rate']:g}: {line}")
    if out is not None:
        report_files(save(lambda: result.write(out), rows, printed=args.json))
    if result.status == "interrupted":
        missing = result.summary["missing_rates"]
        print(f"interrupted: {len(loads)} of {len(loads) + len(missing)} loads finished"
              f"{' and were written' if args.out else ''}; missing rates "
              f"{', '.join(f'{r:g}' for r in missing)}", file=sys.stderr)
    return result.exit_status


def _table(rows: list[dict]) -> None:
    ref = any(r["booksim_latency"] is not None for r in rows)
    print(f"{'rate':>7} {'offered':>8} {'accepted':>8} {'avg lat':>8} {'p99':>6} {'hops':>5} {'sat':>4}"
          + (f" {'BookSim2':>9}" if ref else ""))
    for r in rows:
        b = r["booksim_latency"]
        print(f"{r['rate']:7.3f} {r['offered']:8.4f} {r['accepted']:8.4f} {r['avg_latency']:8.2f} "
              f"{r['p99_latency']:6.0f} {r['avg_hops']:5.2f} {'yes' if r['saturated'] else 'no':>4}"
              + (f" {b:9.2f}" if b is not None else (" " * 10 if ref else "")))
    if ref:
        print("BookSim2: the published latency of BookSim2's 8x8 reference router (\"config B\") at that load",
              file=sys.stderr)

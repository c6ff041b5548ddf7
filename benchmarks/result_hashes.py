"""The result_hash of every example config and of the NoC reference runs, as JSON lines.

    python benchmarks/result_hashes.py                 # print every case's hash
    python benchmarks/result_hashes.py --check         # compare with benchmarks/data/result_hashes.json
    python benchmarks/result_hashes.py --record        # write that file (before a refactor)
    python benchmarks/result_hashes.py --network cycle # also every chip example on the cycle-level NoC
    python benchmarks/result_hashes.py --smoke         # two quick cases, checked (the test suite)
    python benchmarks/result_hashes.py --long --only serve   # the real-model serving examples (minutes each)

A refactor or a speed-up of the simulator must not change what it simulates: every case
here must keep its hash. Cases: every ``rdasim run`` example on its own
NoC model (and, with ``--network cycle``, on the cycle-level one), and the ``rdasim noc``
reference curve (8x8 config B, every reference load), a 4x4 torus, hotspot traffic with
3-flit packets and a 16x16 mesh. Prints one line per case: name, hash, wall seconds.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, "data", "result_hashes.json")

NOC_CASES = {
    "noc 8x8 config B": [],
    "noc 4x4 torus transpose": ["--set", "noc.k=4", "--set", "noc.topology=torus", "--set", "noc.traffic=transpose"],
    "noc 8x8 hotspot 3-flit": ["--set", "noc.traffic=hotspot", "--set", "noc.packet_flits=3"],
    "noc 16x16": ["--set", "noc.k=16"],
}
NOC_RATES = {"noc 16x16": [0.1, 0.2]}
SMOKE_CASES = ("noc 4x4 torus transpose", "run race.toml")  # --smoke: checked against the recorded hashes
SMOKE_KEYS = (("case", "result_hash", "wall_seconds"), ("checked", "changed", "not_recorded"))


def _kind(path: str) -> str:
    """The file's workload kind."""
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f).get("workload", {}).get("kind", "kv-decode")


# workloads that price their steps from plans simulated on the whole chip (sim/workloads/serve/anchors.py):
# a cold run simulates each anchor, minutes a run (the real-model examples took over 7 CPU
# minutes each); hashed with --long only. tests/sim/workloads/serve/ checks small serving runs give one
# result_hash in one process, in shards and on Ray
LONG_KINDS = {"serve", "serve-system"}


def chip_cases(networks: list[str], long: bool = False) -> dict[str, tuple[str, list[str]]]:
    from sim.workloads import WORKLOADS

    cases = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.toml"))):
        text = open(path).read()
        if "[workload]" not in text or ("[chip]" not in text and "[system]" not in text):
            continue
        kind = _kind(path)
        if kind not in WORKLOADS:
            continue  # not an `rdasim run` config (map_*.toml are `rdasim map` configs)
        if kind in LONG_KINDS and not long:
            continue
        name = os.path.basename(path)
        cases[f"run {name}"] = (path, [])
        if "[system]" in text:
            continue  # a system: its grid chips' NoC model is part of the example
        for net in networks:
            cases[f"run {name} noc.model={net}"] = (path, ["--set", f"noc.model={net}"])
    return cases


def run_chip(path: str, sets: list[str]) -> str:
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA, chip_config
    from cluster.jobs.chip import simulate_chip

    overrides = [sets[i + 1] for i in range(0, len(sets), 2)]
    cfg = load(RUN_SCHEMA, path, overrides)
    if cfg["system"]["chips"]:
        from cluster.config.run import system_config
        from cluster.jobs.system import simulate_system

        return simulate_system(system_config(cfg)).summary["result_hash"]
    return simulate_chip(chip_config(cfg)).summary["result_hash"]


def run_noc(sets: list[str], rates: list[float] | None) -> dict[str, str]:
    from cluster.config import load
    from cluster.config.noc import NOC_SCHEMA, params_of, rates_of
    from cluster.jobs.noc import simulate_noc

    overrides = [sets[i + 1] for i in range(0, len(sets), 2)]
    cfg = load(NOC_SCHEMA, None, overrides)
    out = {}
    for r in rates or rates_of(cfg):
        out[f"{r:g}"] = simulate_noc(params_of(cfg, r)).summary["result_hash"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the recorded hashes; exit 1 on a change")
    ap.add_argument("--record", action="store_true", help="write the hashes to benchmarks/data/result_hashes.json")
    ap.add_argument("--network", action="append", default=[], help="also run every chip example on this NoC model")
    ap.add_argument("--only", help="run only cases whose name contains this text")
    ap.add_argument("--smoke", action="store_true", help=f"{' and '.join(SMOKE_CASES)}, checked")
    ap.add_argument("--long", action="store_true",
                    help=f"also the examples priced by simulated plans ({', '.join(sorted(LONG_KINDS))})")
    args = ap.parse_args()
    if args.smoke:
        args.check = True
    got: dict[str, object] = {}
    cases: dict[str, tuple] = {k: ("noc", v) for k, v in NOC_CASES.items()}
    cases.update({k: ("run", v) for k, v in chip_cases(args.network, args.long).items()})
    for name, (kind, spec) in cases.items():
        if (args.only and args.only not in name) or (args.smoke and name not in SMOKE_CASES):
            continue
        t = time.perf_counter()
        h = run_noc(spec, NOC_RATES.get(name)) if kind == "noc" else run_chip(*spec)
        got[name] = h
        print(json.dumps({"case": name, "result_hash": h, "wall_seconds": round(time.perf_counter() - t, 2)}),
              flush=True)
    if args.record:
        old = json.load(open(DATA)) if os.path.exists(DATA) else {}
        old.update(got)
        tmp = f"{DATA}.{os.getpid()}.tmp"  # written whole, then renamed: an interrupted record loses nothing
        with open(tmp, "w") as fh:
            json.dump(old, fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, DATA)
    if args.check:
        want = json.load(open(DATA))
        bad = [k for k in got if k in want and want[k] != got[k]]
        missing = [k for k in got if k not in want]
        print(json.dumps({"checked": len(got) - len(missing), "changed": bad, "not_recorded": missing}))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What one epoch's exchange costs between shard actors, by chaining. JSON lines.

    python benchmarks/chaining_speed.py              # 2 actors and as many as the machine has cores
    python benchmarks/chaining_speed.py --actors 2,3,4 --repeats 5
    python benchmarks/chaining_speed.py --smoke      # 2 actors, once: what the test suite runs

Trivial actors (no shard to simulate) pass a small int64 array, as an epoch's report is:

- ``direct_poll``: actor to actor over their channels (cluster/parallel/channels.py), polling
  for the peers' epochs (yielding the core between polls) up to SPIN_SECONDS before sleeping,
  as a run does;
- ``direct_sleep``: the same, sleeping on the sockets at once;
- ``driver``: a round trip through the driver, every actor taking every actor's array.

Figures are medians over ``--repeats`` of each actor's median over 200 exchanges (the slowest
actor's), measured one after another so they see the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# the shape of the JSON lines (tests/test_benchmarks.py runs --smoke and checks it)
SMOKE_KEYS = (("bench", "actors", "cores", "direct_poll_us", "direct_sleep_us", "driver_us",
               "driver_over_direct_poll"),)


class _Relay:
    def epoch(self, *outputs):
        return outputs[0]


def driver_round_trip(ray, n: int, rounds: int = 50) -> float:
    import numpy as np

    from cluster.parallel.ray_env import actor_cpus, cluster_cpus

    actors = [ray.remote(num_cpus=actor_cpus(cluster_cpus(), n))(_Relay).remote() for _ in range(n)]
    try:
        outs = [np.zeros(64, dtype=np.int64)] * n
        times = []
        for _ in range(rounds + 2):  # the first two include starting the actors
            a = time.perf_counter()
            outs = ray.get([x.epoch.remote(*outs) for x in actors])
            times.append(time.perf_counter() - a)
        return statistics.median(times[2:])
    finally:
        for x in actors:
            ray.kill(x)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--actors", help="comma-separated actor counts (default: 2 and the core count)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="2 actors, one repeat")
    args = ap.parse_args()
    if args.smoke:
        args.actors, args.repeats = "2", 1
    from cluster.parallel.ray_actors import SPIN_SECONDS, round_trip_seconds
    from cluster.parallel.ray_env import cluster_cpus, init_ray

    ray = init_ray()
    cores = int(cluster_cpus())
    counts = [int(x) for x in args.actors.split(",")] if args.actors else sorted({2, max(cores, 2)})
    for n in counts:
        runs: dict[str, list[float]] = {"direct_poll": [], "direct_sleep": [], "driver": []}
        for _ in range(args.repeats):
            runs["direct_poll"].append(round_trip_seconds(n, spin=SPIN_SECONDS))
            runs["direct_sleep"].append(round_trip_seconds(n, spin=0.0))
            runs["driver"].append(driver_round_trip(ray, n))
        row = {"bench": "chaining_speed", "actors": n, "cores": cores, "load_average": round(os.getloadavg()[0], 2)}
        for k, v in runs.items():
            row[f"{k}_us"] = round(statistics.median(v) * 1e6, 1)
        row["driver_over_direct_poll"] = round(row["driver_us"] / row["direct_poll_us"], 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()

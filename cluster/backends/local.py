"""In-process backend: every shard in this process, the same epoch loop as on Ray.

Used to debug (one process, plain stack traces) and as the reference the Ray backend
must reproduce bit for bit.
"""

from __future__ import annotations

import time

import numpy as np

from cluster.backends import Outcome
from cluster.coordinator import meta_after, next_window, split_by_shard, stop_rule
from cluster.partition import owner_map
from sim.noc.shard import Boundary, NocShard
from sim.noc.topology import PORTS


def run_local(params, regions, epoch: int, progress=None) -> Outcome:
    start = time.perf_counter()
    shards = [NocShard(params, r) for r in regions]
    n = len(shards)
    owner = owner_map(regions, params.rows, params.cols)
    pv = PORTS * params.vcs
    measure_end = params.warmup_cycles + params.measure_cycles
    horizon = measure_end + params.drain_cycles
    inbound = [Boundary() for _ in range(n)]
    t0, t1 = 0, epoch
    epochs, advancing = 0, 0.0
    while True:
        a = time.perf_counter()
        outs = [s.advance(t0, t1, b) for s, b in zip(shards, inbound)]
        advancing += time.perf_counter() - a
        metas = [meta_after(s, t0, t1, o) for s, o in zip(shards, outs)]
        if n > 1:
            routed = [split_by_shard(o, owner, pv, n) for o in outs]
            inbound = [Boundary.concat([routed[j][i] for j in range(n)]) for i in range(n)]
        epochs += 1
        stop = stop_rule(metas, measure_end, horizon)
        if progress is not None:
            progress(t1, horizon)
        if stop.done:
            break
        t0, t1 = next_window(metas, epoch)
    wall = time.perf_counter() - start
    transit = sum(len(b.flit_cycle) for b in inbound) if n > 1 else 0
    return Outcome([s.report() for s in shards], epochs, t1, stop.saturated, wall, wall - advancing, transit)

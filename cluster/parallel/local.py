"""In-process backend: every shard in this process, the same epoch loop as on Ray.

Used to debug (one process, plain stack traces) and as the reference the Ray backend
must reproduce bit for bit.
"""

from __future__ import annotations

import resource
import time
from typing import Any

from cluster.parallel.epochs import WindowLengths, bounds_windows, first_window, meta_after, next_window
from cluster.parallel.model import ProgressFn, RunOutcome, ShardModel, Stop


def run_local(model: ShardModel, regions: list[Any], epoch: int, address: str | None = None,
              progress: ProgressFn | None = None, until: int | None = None, budget: float | None = None,
              max_window: int | None = None) -> RunOutcome:
    """Run ``model`` on ``regions`` (``address``: unused, no cluster is needed); a pilot
    (cluster/parallel/shard_plan.py) stops after the window that reaches cycle ``until`` or
    once its shards have advanced for ``budget`` seconds (checked every ``max_window``
    cycles at most)."""
    start = time.perf_counter()
    shards = [model.build(r, i) for i, r in enumerate(regions)]
    n = len(shards)
    bounded = [bounds_windows(s, n) for s in shards]
    inbound = [model.empty() for _ in range(n)]
    t0, t1 = first_window(epoch, model.horizon)
    epochs = 0
    busy, exchange = [0.0] * n, [0.0] * n  # per shard: advancing; reporting and routing its output
    windows = WindowLengths()
    lockstep = 0.0  # sum over epochs of the slowest shard's epoch: the critical path of parallel shards
    stop = Stop(False, False)
    while True:
        outs, metas, routed = [], [], []
        slowest = 0.0
        for i, (s, b) in enumerate(zip(shards, inbound)):
            a = time.perf_counter()
            o = s.advance(t0, t1, b)
            m = time.perf_counter()
            outs.append(o)
            metas.append(meta_after(s, t0, t1, o, bounded[i]))
            if n > 1:
                routed.append(model.split(o, n))
            busy[i] += m - a
            exchange[i] += time.perf_counter() - m
            slowest = max(slowest, time.perf_counter() - a)
        lockstep += slowest
        if n > 1:
            inbound = [model.concat([routed[j][i] for j in range(n)]) for i in range(n)]
        epochs += 1
        windows.add(t1 - t0)
        stop = model.stop(metas)
        if progress is not None:
            progress(t1, model.horizon)
        if stop.done or (until is not None and t1 >= until) or (budget is not None and sum(busy) >= budget):
            break
        t0, t1 = next_window(metas, epoch, model.horizon)
        if max_window is not None:
            t1 = min(t1, t0 + max_window)
    wall = time.perf_counter() - start
    transit = model.in_transit(inbound) if n > 1 else 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    extra = {"chaining": "in-process", "shard_busy_seconds": busy, "exchange_seconds": exchange,
             "lockstep_seconds": lockstep,
             "peak_rss_bytes": peak, **windows.stats()}
    return RunOutcome([model.report(s) for s in shards], epochs, t1, stop.saturated, wall, wall - sum(busy), transit,
                      extra=extra)

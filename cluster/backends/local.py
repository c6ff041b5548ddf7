"""In-process backend: every shard in this process, the same epoch loop as on Ray.

Used to debug (one process, plain stack traces) and as the reference the Ray backend
must reproduce bit for bit.
"""

from __future__ import annotations

import time

from cluster.backends import RunOutcome, noc_model
from cluster.coordinator import meta_after, next_window


def run_local(params, regions, epoch: int, progress=None, model=None) -> RunOutcome:
    """Run ``model`` (default: the NoC under ``params``' synthetic traffic) on ``regions``."""
    start = time.perf_counter()
    model = model or noc_model(params, regions)
    shards = [model.build(r, i) for i, r in enumerate(regions)]
    n = len(shards)
    inbound = [model.empty() for _ in range(n)]
    t0, t1 = 0, epoch
    epochs, advancing = 0, 0.0
    while True:
        a = time.perf_counter()
        outs = [s.advance(t0, t1, b) for s, b in zip(shards, inbound)]
        advancing += time.perf_counter() - a
        metas = [meta_after(s, t0, t1, o, n) for s, o in zip(shards, outs)]
        if n > 1:
            routed = [model.split(o, n) for o in outs]
            inbound = [model.concat([routed[j][i] for j in range(n)]) for i in range(n)]
        epochs += 1
        stop = model.stop(metas)
        if progress is not None:
            progress(t1, model.horizon)
        if stop.done:
            break
        t0, t1 = next_window(metas, epoch)
    wall = time.perf_counter() - start
    transit = model.in_transit(inbound) if n > 1 else 0
    return RunOutcome([model.report(s) for s in shards], epochs, t1, stop.saturated, wall, wall - advancing, transit)

"""Ray backend: one actor per shard; by default a driver round trip per epoch.

Each actor's epoch takes every shard's output of the previous epoch (a small report
plus the boundary traffic addressed to each shard) and produces its own. All actors
compute the same next window and the same stop decision from the same reports
(coordinator.py), which keeps the result bit-identical to the in-process backend.

How epochs are chained is a measured choice (benchmarks/noc_speed.py, two cores).
With trivial actors, passing ObjectRefs from one epoch's calls into the next cost about
2.5 ms per epoch, a driver round trip 1.6 ms, and a Ray compiled graph unrolling
``EPOCHS_PER_ROUND`` epochs (actors handing traffic to each other over shared-memory
channels) 0.5 ms. With real shards the compiled graph's channel threads compete with the
simulation for the cores: a 64x64 half-grid shard advanced an epoch in 11.3 ms instead
of 6.8 ms, and the run took 7.5 s against 5.4 s with driver round trips (32x32: 2.9 s
against 2.6 s). So the default is one driver round trip per epoch; ``compiled=True``
selects the compiled graph, which should pay on nodes with cores to spare.
"""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from cluster import wire
from cluster.backends import RunOutcome, noc_model, window_stats
from cluster.coordinator import EpochMeta, meta_after, next_window
from cluster.ray_env import actor_cpus, cluster_cpus, init_ray

# Unrolling more epochs per compiled round did not lower the per-epoch cost (32x32, two
# shards: ~6 ms per epoch for 8, 16 or 32) but raised compile time (1.3 s -> 3.9 s) and
# actor memory (230 MB -> 480 MB, channel buffers), so rounds are short.
EPOCHS_PER_ROUND = 8


@dataclass(frozen=True, slots=True)
class ActorReport:
    """What a shard actor hands back when the run is over."""

    report: Any  # the model's report of the shard
    busy_seconds: float  # time spent advancing the shard
    handling_seconds: float  # time in its epoch calls spent otherwise: unpacking, earliest output, packing
    peak_rss_bytes: int
    windows: dict  # window_stats of the windows it simulated
    epochs: int
    saturated: bool  # the stop rule cut the run off at its horizon
    end_cycle: int


class ShardActor:
    """Holds one shard of a model and advances it one epoch per call."""

    def __init__(self, model: Any, region: Any, index: int, n: int, epoch: int) -> None:
        self.model = model
        self.shard = model.build(region, index)
        self.i, self.n, self.E = index, n, epoch
        self.busy = 0.0
        self.handling = 0.0
        self.epochs = 0
        self.stop = None
        self.windows: list[int] = []

    def epoch(self, *outputs):
        """outputs[j] = shard j's packed output of the previous epoch; returns this shard's."""
        a = time.perf_counter()
        busy = self.busy
        out = self._epoch(outputs)
        self.handling += time.perf_counter() - a - (self.busy - busy)
        return out

    def _epoch(self, outputs):
        n, model = self.n, self.model
        metas = [wire.meta_of(o) for o in outputs]
        if self.epochs == 0 and self.stop is None:
            t0, t1 = 0, self.E
        else:
            last = metas[0]
            stop = model.stop(metas) if last.active else None
            if stop is None or stop.done:
                if self.stop is None:  # first idle epoch: keep the last traffic sent to us
                    self.shard.deliver(model.concat([wire.part_of(o, self.i, model) for o in outputs]))
                self.stop = self.stop or stop
                idle = EpochMeta(last.t0, last.t1, float("inf"), float("inf"),
                                 last.created, last.finished, active=False)
                return wire.pack(idle, [model.empty()] * n, model)
            t0, t1 = next_window(metas, self.E)
        inbound = model.concat([wire.part_of(o, self.i, model) for o in outputs])
        a = time.perf_counter()
        out = self.shard.advance(t0, t1, inbound)
        self.busy += time.perf_counter() - a
        self.epochs += 1
        self.windows.append(t1 - t0)
        return wire.pack(meta_after(self.shard, t0, t1, out, n), model.split(out, n), model)

    def report(self) -> ActorReport:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return ActorReport(self.model.report(self.shard), self.busy, self.handling, peak, window_stats(self.windows),
                           self.epochs, bool(self.stop and self.stop.saturated), self.shard.t)


class _Echo:
    """A shard actor without a shard: what an epoch costs besides simulating."""

    def epoch(self, *outputs):
        return outputs[0]


def round_trip_seconds(n: int, address: str | None = None, rounds: int = 12) -> float:
    """Median seconds of one driver round trip through ``n`` trivial actors that each take
    every actor's small array, as epochs do (cluster/shard_plan.py's per-epoch cost)."""
    ray = init_ray(address)
    cpus = actor_cpus(cluster_cpus(), n)
    actors = [ray.remote(num_cpus=cpus)(_Echo).remote() for _ in range(n)]
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


def _initial(n: int, model):
    return [wire.pack(EpochMeta(0, 0, 0.0, 0.0, 0, 0), [model.empty()] * n, model) for _ in range(n)]


def _compile_round(actors, rounds: int):
    from ray.dag import InputNode, MultiOutputNode

    n = len(actors)
    with InputNode() as inp:
        prev = [inp[j] for j in range(n)]
        for _ in range(rounds):
            prev = [a.epoch.bind(*prev) for a in actors]
        dag = MultiOutputNode(prev)
    return dag.experimental_compile()


def run_ray(params, regions, epoch: int, address=None, progress=None, compiled: bool = False,
            model=None) -> RunOutcome:
    """Run ``model`` (default: the NoC under ``params``' synthetic traffic) with one actor per region."""
    ray = init_ray(address)
    start = time.perf_counter()
    n = len(regions)
    model = model or noc_model(params, regions)
    pg = ray.util.get_current_placement_group()  # a sweep point: the driver sized our bundles
    cpus = pg.bundle_specs[0].get("CPU", 1.0) if pg is not None else actor_cpus(cluster_cpus(), n)
    Actor = ray.remote(num_cpus=cpus)(ShardActor)
    actors = [Actor.remote(model, r, i, n, epoch) for i, r in enumerate(regions)]
    horizon = model.horizon
    outputs = _initial(n, model)
    mode = "driver"
    try:
        graph = None
        if compiled and not (address or "").startswith("ray://"):
            try:
                graph = _compile_round(actors, EPOCHS_PER_ROUND)
                mode = "compiled-graph"
            except Exception:  # noqa: BLE001 - any failure to compile: use the plain path
                graph = None
        while wire.meta_of(outputs[0]).active:
            if graph is not None:
                outputs = ray.get(graph.execute(*outputs))
            else:
                outputs = ray.get([a.epoch.remote(*outputs) for a in actors])
            if progress is not None:
                progress(wire.meta_of(outputs[0]).t1, horizon)
        if graph is not None:
            graph.teardown()
        results = ray.get([a.report.remote() for a in actors])
    finally:
        for a in actors:
            ray.kill(a)
    wall = time.perf_counter() - start
    transit = 0  # actors took their last inbound traffic into their calendars when they stopped
    first = results[0]
    busy = max(r.busy_seconds for r in results)
    # an actor's exchange time: everything but advancing its shard (packing, earliest
    # output, the driver round trip, waiting for the slowest shard)
    extra = {"peak_rss_bytes": max(r.peak_rss_bytes for r in results), "chaining": mode,
             "peak_rss_bytes_per_shard": [r.peak_rss_bytes for r in results],
             "shard_busy_seconds": [r.busy_seconds for r in results],
             "handling_seconds": [r.handling_seconds for r in results],
             "exchange_seconds": [wall - r.busy_seconds for r in results], **first.windows}
    return RunOutcome([r.report for r in results], first.epochs, first.end_cycle, first.saturated, wall, wall - busy,
                      transit, extra=extra)

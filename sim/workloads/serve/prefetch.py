"""Anchors simulated ahead of need and side by side: the planning pass and its worker processes.

An anchor (anchors.py) is a pure function of the chip, the run's memory and NoC, the model and
its shape, and nearly all of a serve run's time: the serve loop of 1,630 steps takes about a
CPU second, each anchor 7-70 s. The steps that need anchors come one after another, but which
anchors they will need is known, nearly, before they run: the planning pass
(scheduler.planned_anchors) replays the run with every step at its roofline (E = 1; the same
scheduler, KV pages and trace) and notes the anchors its steps ask for, in order. Those the run
has not got are then simulated in ``workers`` processes at once, the longest first (Graham's
LPT rule, 1969), while the run goes on; a step waits only for its own anchor. An anchor the
planning pass did not foresee (the run's steps, priced above their roofline, end later and
batch differently) is simulated when a step needs it, as without the pass; one foreseen and
never needed is logged (``used`` false in run_anchors) and kept in the step cache. Since every
anchor is the same wherever it is simulated, so is every price, and the run's steps and result
hash are those of a run without it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import weakref
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_any
from dataclasses import dataclass, replace

from mapping.models import ModelSpec
from sim.workloads.serve.anchors import LAYERS, StepPlanRun, compute_bound, simulate_anchor
from sim.workloads.serve.progress import AnchorDone, ProgressSink, Waiting
from sim.workloads.serve.shapes import StepShape


@dataclass(frozen=True)
class Simulated:
    """An anchor's simulation and the wall time it took; from a worker, the error it raised instead
    (raised when a step needs the anchor, as if it had been simulated then)."""

    run: StepPlanRun | None
    wall_seconds: float
    ahead: bool = False  # simulated by the planning pass, in a worker process
    error: BaseException | None = None
    cached: bool = False  # read from the step cache (another process stored it), not simulated

    def result(self) -> StepPlanRun:
        if self.run is None:
            raise self.error or RuntimeError("an anchor simulated ahead has neither a run nor an error")
        return self.run


@dataclass(frozen=True)
class Keys:
    """An anchor's keys in the step cache (cache.key): without and with the run's on_oom."""

    plain: str
    with_oom: str


def simulate(cfg, model: ModelSpec, shape: StepShape, options, keys: Keys | None = None) -> Simulated:
    """One anchor simulated in this process and timed (``options``: a CostOptions), or, with a
    step cache and its ``keys``, read from it, or simulated once under its key's lock and stored
    (cache.once: a process that waited for another's reads it)."""
    from sim.workloads.serve import cache

    t0 = time.perf_counter()

    def run() -> StepPlanRun:
        return simulate_anchor(cfg, model, shape, options.tiles, options.stream_bytes,
                               {"time_limit": options.map_seconds}, layers=LAYERS if options.looping else 1)

    if not options.cache or keys is None:
        return Simulated(run(), time.perf_counter() - t0)
    got, hit = cache.once(options.cache, keys.plain, keys.with_oom, run)
    return Simulated(got, 0.0 if hit else time.perf_counter() - t0, cached=hit)


def _ahead(cfg, model: ModelSpec, shape: StepShape, options, keys: Keys | None) -> Simulated:
    """A worker's anchor: its error kept for the step that will need it."""
    t0 = time.perf_counter()
    try:
        return replace(simulate(cfg, model, shape, options, keys), ahead=True)
    except Exception as exc:  # noqa: BLE001 -- any error is the step's, raised when it needs the anchor
        return Simulated(None, time.perf_counter() - t0, True, exc)


def workers(n: int) -> int:
    """Processes simulating anchors: ``n``, or for 0 this process's share of the cores:
    OMP_NUM_THREADS where set (Ray sets it to a task's or actor's CPUs, 1 by default: a sweep's
    runs and a run's shards already share out the cores; batch schedulers set it alike), else the
    cores it may run on."""
    if n > 0:
        return n
    share = os.environ.get("OMP_NUM_THREADS", "")
    if share.isdigit() and int(share) > 0:
        return int(share)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _context():
    """How worker processes start: forked when this process runs one thread (at once, nothing
    imported again, and a script calling the API needs no ``if __name__ == "__main__"``
    guard), spawned otherwise (forking a process whose other threads may hold locks can hang)."""
    fork = "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1
    return multiprocessing.get_context("fork" if fork else "spawn")


class Ahead:
    """Anchors being simulated in worker processes, the longest first (module docstring); ``sink``
    (progress.py) told of each as it ends, in this process (``poll``, ``pop``, ``close``)."""

    WAIT_SECONDS = 1.0  # a step waiting for its anchor tells the sink so this often

    def __init__(self, cfg, model: ModelSpec, shapes: list[StepShape], options, n: int,
                 keys: dict[StepShape, Keys] | None = None, sink: ProgressSink | None = None):
        order = self.order(cfg, model, shapes)
        self.sink = sink
        self.told: set[StepShape] = set()
        self.pool = ProcessPoolExecutor(max_workers=min(n, len(order)), mp_context=_context())
        self.futures: dict[StepShape, Future] = {a: self.pool.submit(_ahead, cfg, model, a, options,
                                                                     (keys or {}).get(a)) for a in order}
        # a run that ends without closing it (cut off at run.max_cycles before its last step, or
        # raising) drops the anchors not yet started when it lets go of this, not at the process's exit
        weakref.finalize(self, self.pool.shutdown, wait=False, cancel_futures=True)

    @staticmethod
    def order(cfg, model: ModelSpec, shapes: list[StepShape]) -> list[StepShape]:
        """The order the workers take ``shapes`` in: the longest first (a compute-bound (prefill) anchor
        simulates a pipeline of up to 20 whole-chip iterations, a memory-bound one a few layers; more
        tokens, more messages)."""
        return sorted(shapes, key=lambda a: (compute_bound(model, a, cfg.spec), a.tokens, a.kv_read), reverse=True)

    def poll(self) -> None:
        """Tell the sink of every anchor whose worker has finished since it was last told."""
        if self.sink is None:
            return
        for a, f in self.futures.items():
            if a not in self.told and f.done() and not f.cancelled():
                self.told.add(a)
                got = f.result()
                self.sink(AnchorDone(a, got.wall_seconds, got.cached))

    def pop(self, shape: StepShape) -> Simulated | None:
        """The anchor of ``shape`` once its worker has simulated it (waiting for it); None if the
        planning pass did not foresee it."""
        f = self.futures.get(shape)
        if f is None:
            return None
        while self.sink is not None and not f.done():  # the others' ends told as they come
            wait_any([g for g in self.futures.values() if not g.done()], self.WAIT_SECONDS, FIRST_COMPLETED)
            self.poll()
            if not f.done():
                self.sink(Waiting(shape))
        self.poll()
        del self.futures[shape]
        return f.result()

    def close(self) -> dict[StepShape, Simulated]:
        """Stop: anchors not started are dropped, those running finished; what was simulated and
        never popped (the anchors no step needed)."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.poll()
        left = {a: f.result() for a, f in self.futures.items() if not f.cancelled()}
        self.futures = {}
        return left

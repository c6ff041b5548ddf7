"""In-process backend: every shard in this process, the same epoch loop as on Ray.

Used to debug (one process, plain stack traces) and as the reference the Ray backend
must reproduce bit for bit. A run here can stop and go on (``LocalRun``): a plan
(cluster/parallel/shard_plan.py) runs the opening of a run in one process and, when one
process is what it chooses, the run goes on from there instead of starting again.
"""

from __future__ import annotations

import resource
import time
from typing import Generic

from cluster.parallel.epochs import WindowLengths, bounds_windows, first_window, meta_after, next_window
from cluster.parallel.model import BackendFigures, ProgressFn, R, Rep, RunOutcome, ShardModel, Stop, T


class LocalRun(Generic[R, T, Rep]):
    """``model``'s shards of ``regions`` in this process, advanced epoch by epoch on request."""

    def __init__(self, model: ShardModel[R, T, Rep], regions: list[R], epoch: int,
                 progress: ProgressFn | None = None) -> None:
        self.start = time.perf_counter()
        self.model, self.epoch, self.progress = model, epoch, progress
        self.shards = [model.build(r, i) for i, r in enumerate(regions)]
        n = self.n = len(self.shards)
        self.bounded = [bounds_windows(s, n) for s in self.shards]
        self.nothing = model.empty()
        self.inbound = [self.nothing] * n
        self.t0, self.t1 = first_window(epoch, model.horizon)
        self.epochs = 0
        self.busy, self.exchange = [0.0] * n, [0.0] * n  # per shard: advancing; reporting and routing its output
        self.windows = WindowLengths()
        self.lockstep = 0.0  # sum over epochs of the slowest shard's epoch: the critical path of parallel shards
        self.stop = Stop(False, False)
        self.reached = 0  # the end of the last window run: every cycle before it is simulated
        self._last: tuple[int, float] | None = None  # the last window: cycles, and seconds of its slowest shard

    @property
    def shard(self):
        """The one shard of a run in one piece."""
        return self.shards[0]

    def run(self, until: int | None = None, budget: float | None = None, max_window: int | None = None,
            pace: float | None = None) -> bool:
        """Run epochs until the stop rule ends the run (True), or (False) after the window that
        reaches cycle ``until`` or once the shards have advanced ``budget`` more seconds. So that
        it stops in time, windows are ``max_window`` cycles at most, and with ``pace`` as long as
        the last window's pace says takes ``pace`` seconds (16 cycles at least)."""
        if self.stop.done:
            return True
        model, n, shards = self.model, self.n, self.shards
        busy_at = sum(self.busy)
        cap = self._paced(pace, max_window)
        while True:
            if cap is not None:
                self.t1 = min(self.t1, self.t0 + cap)
            t0, t1 = self.t0, self.t1
            outs, metas, routed = [], [], []
            slowest = 0.0
            for i, (s, b) in enumerate(zip(shards, self.inbound)):
                a = time.perf_counter()
                o = s.advance(t0, t1, b)
                m = time.perf_counter()
                outs.append(o)
                metas.append(meta_after(s, t0, t1, o, self.bounded[i]))
                if n > 1:
                    routed.append(model.split(o, n))
                self.busy[i] += m - a
                self.exchange[i] += time.perf_counter() - m
                slowest = max(slowest, time.perf_counter() - a)
            self.lockstep += slowest
            self._last = (t1 - t0, slowest)
            cap = self._paced(pace, max_window)
            if n > 1:
                self.inbound = [self.nothing.join([routed[j][i] for j in range(n)]) for i in range(n)]
            self.epochs += 1
            self.windows.add(t1 - t0)
            self.reached = t1
            self.stop = model.stop(metas)
            if self.progress is not None:
                self.progress(t1, model.horizon)
            if self.stop.done:
                return True
            self.t0, self.t1 = next_window(metas, self.epoch, model.horizon)
            if (until is not None and t1 >= until) or (budget is not None and sum(self.busy) - busy_at >= budget):
                return False

    def _paced(self, pace: float | None, max_window: int | None) -> int | None:
        """The longest next window: ``max_window``, and what takes ``pace`` seconds at the last window's pace."""
        if pace is None or self._last is None:
            return max_window
        cycles, seconds = self._last
        paced = max(16, int(pace * cycles / max(seconds, 1e-9)))
        return paced if max_window is None else min(paced, max_window)

    def outcome(self) -> RunOutcome[Rep]:
        """The backend's record of the run so far (the run is over when ``run`` said so)."""
        wall = time.perf_counter() - self.start
        transit = sum(b.flit_count() for b in self.inbound) if self.n > 1 else 0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        mean, median = self.windows.stats()
        figures = BackendFigures("in-process", self.busy, self.exchange, [peak], mean, median,
                                 lockstep_seconds=self.lockstep)
        return RunOutcome([s.report() for s in self.shards], self.epochs, self.reached, self.stop.saturated, wall,
                          wall - sum(self.busy), transit, figures)


def run_local(model: ShardModel[R, T, Rep], regions: list[R], epoch: int, address: str | None = None,
              progress: ProgressFn | None = None) -> RunOutcome[Rep]:
    """Run ``model`` on ``regions`` to the end (``address``: unused, no cluster is needed)."""
    run = LocalRun(model, regions, epoch, progress)
    run.run()
    return run.outcome()

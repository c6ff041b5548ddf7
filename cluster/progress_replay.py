"""A pool of workers replayed on recorded item costs, asking a WorkEta for the time left as it runs.

How the ETA is validated without running anything (tests/cluster/test_progress.py,
benchmarks/eta_accuracy.py --quick): items are given to ``parallel`` workers in order (a sweep's
executor: first in, first out onto the first free worker), every start and finish is told to the
estimator on a manual clock, and at every finish and every second (as often as a progress line
asks) the estimate is kept beside the true time left.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.progress import WorkEta


class ManualClock:
    """A clock that reads what it was last set to (``clock.t = ...``)."""

    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass(frozen=True)
class Estimate:
    """What the estimator said at ``at`` seconds into the replay, and the truth then."""

    at: float
    left: float | None  # None: no estimate had a basis yet
    truth: float


def replay(costs: list[float], features: list[tuple], parallel: int,
           priors: list[float] | None = None, unit_seconds: float | None = None,
           start_up: float = 0.0) -> list[Estimate]:
    """Every estimate of a run of items costing ``costs`` seconds on ``parallel`` workers (module docstring);
    ``unit_seconds`` and ``start_up``: the estimator's, for an estimate before any item has finished."""
    clock = ManualClock()
    eta = WorkEta(parallel, clock=clock, unit_seconds=unit_seconds, start_up=start_up)
    for i, f in enumerate(features):
        eta.add(i, f, priors[i] if priors else 1.0)
    free = [0.0] * parallel
    spans = []  # (start, end, item)
    for i, c in enumerate(costs):
        w = min(range(parallel), key=lambda k: free[k])
        start = free[w]
        free[w] = start + c
        spans.append((start, start + c, i))
    total = max(e for _, e, _ in spans)
    events = sorted([(s, "start", i) for s, _, i in spans] + [(e, "end", i) for _, e, i in spans]
                    + [(float(t), "ask", -1) for t in range(int(total))])
    out = []  # the ask at 0 s sorts before the starts: the predicted costs alone
    for t, kind, i in events:
        clock.t = t
        if kind == "start":
            eta.started(i)
        elif kind == "end":
            eta.finished(i, costs[i])
        if kind != "start" and t < total:
            out.append(Estimate(t, eta.remaining(), total - t))
    return out


def shown_at(estimates: list[Estimate], total: float, share: float) -> Estimate | None:
    """The estimate a progress line showed at ``share`` of the run: the last one with a basis made by then."""
    before = [e for e in estimates if e.at <= share * total and e.left is not None]
    return before[-1] if before else None

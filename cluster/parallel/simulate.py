"""One simulation cut into shards and run: plan the shard count, cut, choose the epoch, run
the backend. Every job (cluster/jobs) runs its model through here and summarises the record."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from cluster.parallel.backends import prepared, run_backend
from cluster.parallel.distribution import distribution_figures, lost_to_one_process
from cluster.parallel.local import LocalRun
from cluster.parallel.model import Decomposition, ProgressFn, RunOutcome
from cluster.parallel.shard_plan import Plan, decide


@dataclass
class Simulation:
    """What ``simulate`` hands back: the backend's outcome and how the run was cut."""

    outcome: RunOutcome  # the shards' reports, epochs, end cycle, saturation, wall and sync seconds
    regions: list[Any]  # one per shard, in shard order
    cut: str
    backend: str  # the backend that ran it (a pilot that keeps the run whole runs it in this process)
    epoch: int  # the least window, in cycles
    lookahead: int | None  # of the cuts (None: nothing is cut)
    plan: Plan | None  # how the shard count was chosen (None: the model takes no pilot)
    distribution: dict[str, Any]  # how the run spent its time (cluster/parallel/distribution.py)

    @property
    def shards(self) -> int:
        return len(self.regions)


def simulate(job: Decomposition[Any, Any, Any], shards: int | str = 1, cut: str = "rows", backend: str = "local",
             epoch: int | None = None, address: str | None = None, progress: ProgressFn | None = None,
             plan: Plan | None = None) -> Simulation:
    """Run ``job`` cut into ``shards`` shards (``"auto"``: the count a pilot predicts fastest,
    cluster/parallel/shard_plan.py) on ``backend``. ``plan``: a count already chosen (a curve
    of loads chooses once for all of them)."""
    opening: LocalRun[Any, Any, Any] | None = None
    with prepared(backend, shards if plan is None else plan.shards, address, (type(job).__module__,)):
        if plan is None and job.pilots:
            decision = decide(shards, job, cut, backend, address, progress, epoch)
            plan, opening = decision.plan, decision.opening
        elif plan is None and not isinstance(shards, int):
            raise ValueError(f"shards = {shards!r}: this model takes no pilot; give a count")
        count = plan.shards if plan is not None else int(shards)
        ran_on = plan.backend(backend) if plan is not None else backend
        regions = job.regions(count, cut)
        e, lookahead = job.epoch(regions, epoch)
        if opening is not None:  # "auto" kept the run in this process: it goes on from its opening
            opening.run()
            o = opening.outcome()
        else:
            o = run_backend(ran_on, job.model(regions), regions, e, address=address, progress=progress)
    lost = lost_to_one_process(plan, o, ran_on)
    if lost:
        print(lost, file=sys.stderr)
    return Simulation(o, regions, cut, ran_on, e, lookahead, plan, distribution_figures(plan, o))

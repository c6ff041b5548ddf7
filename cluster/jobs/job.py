"""A job: one resolved config simulated, from its decomposition to its result record.

A command's config becomes a ``Job`` (cluster/jobs/noc.py, chip.py, system.py): the cases it
simulates, one ``Decomposition`` each (a NoC curve has one per offered load, a chip or a
system run one), each of which also summarises its ``Simulation`` into figures and table
columns (``Summarised``), and the record the job makes of them all (``record``: one ``Result``
of figures, status, Arrow tables and side files, cluster/results/record.py). ``execute`` runs
every job the same way for the command line, the Python API (rdasim/) and sweep points;
``check`` tries what would stop a job before it simulates anything.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar, Protocol, runtime_checkable

import pyarrow as pa

from cluster.config import config_hash
from cluster.config.footprint import least_shards
from cluster.jobs.summarised import Summarised
from cluster.parallel.model import Decomposition, ProgressFn
from cluster.parallel.shard_plan import Plan, plan_shards
from cluster.parallel.simulate import Simulation, simulate
from cluster.progress import Progress, WorkEta
from cluster.progress_serve import ServeLine
from cluster.results.record import Result, Summary
from cluster.results.schemas import RunMeta
from cluster.version import code_version


class Simulated(Decomposition, Protocol):
    """A decomposition that also says what its simulation amounts to."""

    def summarise(self, sim: Simulation) -> Summarised:
        """The run's figures and its tables' columns (status included where the model has one)."""
        ...


@runtime_checkable
class Watchable(Protocol):
    """A decomposition whose programs can tell a progress sink how they go (a serve run's phases)."""

    def watched(self, sink: Any) -> Simulated:
        """The same decomposition, its shards' programs telling ``sink`` (in this process only)."""
        ...


@dataclass(frozen=True)
class Case:
    """One simulation of a job and how its progress is shown."""

    grid: Simulated
    label: str  # the progress line's: "noc rate 0.1", "run kv-decode"
    bound: bool = True  # the horizon bounds the run (it stops when its work is done): no ETA
    says_done: bool = False  # a line when it is done (each load of a NoC curve)
    cost: float = 1.0  # its predicted cost relative to the job's other cases (the ETA's prior: cluster/sweep/cost.py)


class Job(Protocol):
    """One resolved config of a command, checked as far as it can be without simulating."""

    command: ClassVar[str]  # noc, run or system: the result's and a sweep's name for it
    cfg: dict  # the resolved config

    def cases(self) -> list[Case]:
        """What to simulate, in order."""
        ...

    def record(self, done: Sequence[Summarised | None], meta: RunMeta) -> Result:
        """The result of the cases simulated (None: not simulated, the run was interrupted)."""
        ...


def run_id_for(cfg_hash: str, seed: int) -> str:
    """A run's id: its config hash, seed and start time (two runs of one config differ)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{cfg_hash}-s{seed}-{stamp}"


def run_meta(cfg: dict) -> RunMeta:
    """The identity of a new run of ``cfg`` (every row of its tables carries it)."""
    chash = config_hash(cfg)
    return RunMeta(run_id_for(chash, cfg["run"]["seed"]), chash, cfg["run"]["seed"])


def result(command: str, meta: RunMeta, cfg: dict, status: str, detail: str, figures: dict[str, Any],
           tables: dict, files: dict[str, Any] | None = None, simulations: Sequence[Simulation] = ()) -> Result:
    """A job's record with its identity (``meta``) and the code that made it."""
    summary = Summary(command, meta.run_id, meta.config_hash, int(meta.seed), code_version(), status, detail, figures)
    return Result(summary, tables, cfg, dict(files or {}), list(simulations))


def simulate_case(grid: Simulated, shards: int | str = 1, cut: str = "rows", backend: str = "local",
                  epoch: int | None = None, address: str | None = None, progress: ProgressFn | None = None,
                  plan: Plan | None = None) -> Summarised:
    """Simulate one decomposition (cluster/parallel/simulate.py) and summarise it."""
    return grid.summarise(simulate(grid, shards, cut, backend, epoch, address, progress, plan))


def check(job: Job) -> None:
    """What would stop ``job`` once it runs, tried on every case without simulating: its cut
    (the fewest shards the config allows) and epoch (UserError naming the problem)."""
    run = job.cfg["run"]
    for case in job.cases():
        case.grid.epoch(case.grid.regions(least_shards(run["shards"]), run["cut"]), run["epoch"])


def system_arrow_pool() -> None:
    """Arrow's buffers from the system allocator, unless ARROW_DEFAULT_MEMORY_POOL names a pool:
    pyarrow's default (mimalloc in pyarrow 26) keeps the pages a run's tables free, so a serve run's
    peak memory grew 160 B a generated token with it and 92 B without (docs/run.md, Memory per
    generated token). It picks an allocator only: no result depends on it."""
    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())


def execute(job: Job, quiet: bool = False) -> Result:
    """Simulate every case of ``job`` with its [run] section and record them; progress on stderr
    unless ``quiet``. Ctrl-C (or SIGTERM turned into KeyboardInterrupt) keeps the cases that
    finished, and the record says which did not; with none finished it propagates."""
    system_arrow_pool()
    run = job.cfg["run"]
    cases = job.cases()
    meta = run_meta(job.cfg)
    done: list[Summarised | None] = [None] * len(cases)
    try:
        if len(cases) == 1:
            _one(cases, 0, run, quiet, done)
        else:
            _several(job.command, cases, run, quiet, done)
    except KeyboardInterrupt:
        if not any(done):
            raise
    return job.record(done, meta)


def _one(cases: list[Case], i: int, run: dict, quiet: bool, done: list[Summarised | None],
         shards: int | str | None = None, backend: str | None = None, plan: Plan | None = None) -> None:
    """Simulate case ``i`` into ``done[i]``, then say so (an interrupt after the line keeps it)."""
    case = cases[i]
    prog = Progress(case.label, quiet, bound=case.bound)
    grid: Simulated = case.grid
    shown: ProgressFn = prog
    if not quiet and isinstance(grid, Watchable):  # a serve run's line names its phase (cluster/progress_serve.py)
        line = ServeLine(prog)
        grid, shown = grid.watched(line), line.cycles
    one = done[i] = simulate_case(grid, run["shards"] if shards is None else shards, run["cut"],
                                  backend or run["backend"], run["epoch"], run["address"], shown, plan)
    prog.close(f"{case.label}: done in {one.simulation.outcome.wall_seconds:.1f} s" if case.says_done else None)


def _several(command: str, cases: list[Case], run: dict, quiet: bool, done: list[Summarised | None]) -> None:
    """Cases of one config (the offered loads of a curve): the shard count chosen once, on the first, and
    every cut checked before any runs (a Ray task would wrap the error). On Ray, cases of one
    shard each run side by side as Ray tasks (the cores are better spent on independent
    cases than on one case's shards); sharded cases run one after another."""
    first = cases[0].grid
    plan = plan_shards(run["shards"], first, run["cut"], run["backend"], run["address"])
    first.epoch(first.regions(plan.shards, run["cut"]), run["epoch"])
    if run["backend"] == "ray" and plan.shards == 1:
        _as_ray_tasks(command, cases, plan, run, quiet, done)
        return
    for i in range(len(cases)):
        _one(cases, i, run, quiet, done, plan.shards, run["backend"], plan)


def _as_ray_tasks(command: str, cases: list[Case], plan: Plan, run: dict, quiet: bool,
                  done: list[Summarised | None]) -> None:
    """Each case a Ray task run in one process; ``done[i]`` is filled as case i finishes (so an
    interrupt keeps it)."""
    from cluster.parallel.ray_env import init_ray

    ray = init_ray(run["address"])
    task = ray.remote(num_cpus=1)(simulate_case)
    refs = [task.remote(c.grid, plan.shards, run["cut"], "local", run["epoch"], plan=plan) for c in cases]
    index = {ref: i for i, ref in enumerate(refs)}
    eta = WorkEta(int(ray.cluster_resources().get("CPU", 1)) or 1)  # from the cases' costs (a load's grows with it)
    for i, c in enumerate(cases):
        eta.add(i, (), c.cost)
        eta.started(i)
    prog = Progress(f"{command} curve on ray", quiet, eta=eta.remaining)
    finished = 0
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)  # a progress line every few seconds
            for ref in ready:
                done[index[ref]] = ray.get(ref)
                eta.finished(index[ref], None)  # as long as it held its slot (compiling the kernels included)
            finished += len(ready)
            prog(finished, len(refs), unit="loads")
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        prog.close()

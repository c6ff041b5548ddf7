"""Running an exploration: the optimiser asks, trials run as sweep points (Ray tasks or in-process), it is told.

The Explorer is the executor's feed: each time a slot frees it hands out the next run (a
promotion to a higher rung first, else a new candidate from ``study.ask()``), and each
finished run is stored (the sweep's store: atomic, at the trial's key) before the
optimiser is told, so a killed driver loses only the runs in flight. A rerun reads the
stored runs back, rebuilds the optimiser's state from them (``study.add_trial``) and asks
only for the trials the budget still allows: nothing stored is run again.

How a trial is told: a feasible full run with its objectives (COMPLETE); anything else as
PRUNED with a constraint value: 1 when infeasible (a known constraint rejected it, its
config is invalid, its run failed, deadlocked, was cut off, or broke a constraint on its
metrics), 0 when successive halving stopped it (or its cut run has no number to rank it
by yet, e.g. energy per token before the first token). Optuna's TPE learns from infeasible
trials through that constraint and never compares their numbers with feasible ones.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import sys
import time
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import optuna
import pyarrow as pa

from cluster.config.identity import ConfigIdentity
from cluster.config.loader import apply_overrides
from cluster.config.schema import get_path, validate
from cluster.errors import UserError
from cluster.explore.fidelity import promoted, rung_cycles
from cluster.explore.front import Front, find_front, maximize_mask, pareto_table
from cluster.explore.known import earlier_base_id, stored_hash
from cluster.explore.optimizers import OPTIMIZERS, sampler
from cluster.explore.pareto import as_losses
from cluster.explore.reference import BASE_FILE, BasePoint, base_point, read_base, write_base
from cluster.explore.spec import ExploreSpec
from cluster.explore.tally import tally
from cluster.explore.trials import FULL, NOT_RUN, StoredRun, TrialPoint, TrialStore, read_runs, trial_key
from cluster.progress import Progress, WorkEta
from cluster.results import io, writer
from cluster.sweep.execute import PointOutcome
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.manifest import DONE, FAILED, Manifest, PointEntry, RunEntry, now
from cluster.sweep.points import Point
from cluster.sweep.records import STATUS_ERROR, STATUS_OK, PointRun, pick_result
from cluster.sweep.resume import remove_orphans
from cluster.version import code_version

PARETO_FILE = "pareto.parquet"
INFEASIBLE = "infeasible"  # the constraint every trial is told (> 0: infeasible)
FEASIBLE_STATUS = "completed"  # the result's status column of a run that finished its workload
CUT_STATUS = "cut_off"  # ... of a run stopped at run.max_cycles: a usable cheap result below the full rung
CUT_FIDELITY = "max_cycles="  # the fidelity of a cut run: max_cycles=N
MANIFEST_EVERY_SECONDS = 2.0


@dataclass(frozen=True)
class Options:
    """How to run an exploration (what it explores is the spec)."""

    budget: int | None = None  # trials in all (default: the spec's)
    optimizer: str | None = None
    seed: int | None = None
    parallel: int | None = None
    address: str | None = None
    in_process: bool = False
    replace: bool = False
    quiet: bool = False


@dataclass(frozen=True)
class ExploreSummary:
    front: Front
    stored: int  # trials already stored before this invocation
    computed: int  # runs simulated in this invocation
    seconds: float
    dir: Path
    trials: Counter = field(default_factory=Counter)  # how the trials ended (cluster/explore/tally.py)

    def lines(self, spec: ExploreSpec) -> list[str]:
        """The end of an exploration in words: how its trials ended, its front and its hypervolume."""
        from cluster.explore.reference import Reference
        from cluster.explore.tally import line

        f = self.front
        out = [f"explore: {line(self.trials)} ({self.stored} already stored, {self.computed} runs simulated) in "
               f"{self.seconds:.1f} s -> {self.dir}"]
        if f.reference is None:
            out.append("  no feasible trial and no base run to take a reference from: no hypervolume")
            return out
        points = f"{len(f.pareto)} point{'s' if len(f.pareto) != 1 else ''}"
        out.append(f"  front: {points}; hypervolume {f.hypervolume:.6g} (normalised {f.normalized:.3f}: the share "
                   "of the box from the best value of each objective to the reference)")
        out.append(f"  reference: {Reference(f.reference, f.reference_from or {}).describe(spec.objectives)}")
        return out


@dataclass(frozen=True)
class Verdict:
    feasible: bool
    fidelity: str
    final: bool  # the trial's last run: no promotion to decide
    values: tuple[float, ...] | None  # the objectives, when all are numbers
    status: str | None  # the result's status column (None: no result)


@contextmanager
def optuna_quiet():
    """Optuna logs every study created and trial told at INFO: only its warnings while inside."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def violated(fidelity: str, feasible: bool, status: str | None) -> bool:
    """Whether a trial's last run tells the optimiser "infeasible": not when a cut run (which was
    expected to stop) merely had no number to rank it by."""
    return not feasible and not (fidelity.startswith(CUT_FIDELITY) and status == CUT_STATUS)


def directions(spec: ExploreSpec) -> list[optuna.study.StudyDirection]:
    return [optuna.study.StudyDirection.MAXIMIZE if o.maximize else optuna.study.StudyDirection.MINIMIZE
            for o in spec.objectives]


def _study(spec: ExploreSpec, name: str, seed: int, budget: int) -> optuna.Study:
    return optuna.create_study(directions=directions(spec), sampler=sampler(name, spec.space, seed, budget))


def rebuild(study: optuna.Study, spec: ExploreSpec, runs: list[StoredRun]) -> None:
    """Tell a fresh study every stored trial: its full run if it has one, else its last run (pruned)."""
    by_trial: dict[int, list[StoredRun]] = {}
    for r in runs:
        by_trial.setdefault(r.trial, []).append(r)
    for trial in sorted(by_trial):
        rows = by_trial[trial]
        last = next((r for r in rows if r.fidelity == FULL), rows[-1])
        params, dists = spec.space.encode(last.params)
        complete = last.fidelity == FULL and last.feasible and all(math.isfinite(v) for v in last.values)
        study.add_trial(optuna.trial.create_trial(
            state=optuna.trial.TrialState.COMPLETE if complete else optuna.trial.TrialState.PRUNED,
            values=list(last.values) if complete else None, params=params, distributions=dists,
            constraints={INFEASIBLE: 1.0 if violated(last.fidelity, last.feasible, last.status) else 0.0}))


class Explorer:
    """The executor's feed under ask/tell, and the callback that stores and tells each finished run."""

    def __init__(self, spec: ExploreSpec, study: optuna.Study, store: TrialStore, manifest: Manifest,
                 runs: list[StoredRun], stored: pa.Table | None, budget: int, optimizer: str, log, progress,
                 base: BasePoint | None = None):
        self.spec, self.study, self.store, self.manifest = spec, study, store, manifest
        self.base = base  # the base config's own run, still to run (the default reference comes from it)
        self.base_row: dict | None = None
        self.eta = WorkEta()  # the ETA from the runs' costs (parallel set by the executor)
        self.budget, self.optimizer, self.log, self.progress = budget, optimizer, log, progress
        self.maximize = maximize_mask(spec.objectives)
        self.top = len(spec.fidelity.cycles) if spec.fidelity else 0  # the full rung
        self.asked = len({r.trial for r in runs})
        self.next_trial = max((r.trial for r in runs), default=-1) + 1
        self.pending: deque[TrialPoint] = deque()  # promotions waiting for a slot
        self.live: dict[int, optuna.trial.Trial] = {}  # asked, not yet told
        self.inflight = 0
        self.computed = 0
        self.rungs: list[list[np.ndarray]] = [[] for _ in range(self.top)]  # feasible cut results' losses
        for r in runs:
            if r.rung < self.top and r.fidelity != FULL and r.feasible:
                self.rungs[r.rung].append(as_losses(np.array(r.values), self.maximize)[0])
        self.identity = ConfigIdentity(spec.command.schema())
        self.cache: dict[str, pa.Table] = {}  # what a config asks for -> a stored run's result row (job columns)
        if stored is not None:
            drop = self.store.prefix_names()
            own = stored.select([c for c in stored.column_names if c not in drop])
            for i, r in enumerate(runs):
                cfg, issues = self._config(r.params, r.rung)  # as it ran: the spec asks for what it did then
                if r.ok and not issues:
                    self.cache.setdefault(self.identity.point_id(cfg), own.slice(i, 1))
        self.saved_at = time.monotonic()

    # ------------------------------------------------------------------ the feed
    def take(self) -> Point | None:
        point = self._take()
        if point is not None:
            self.eta.add(point.id, _features(point, self.top), 1.0)
            self.eta.started(point.id)
        return point

    def _take(self) -> Point | None:
        if self.base is not None:  # first, beside the first trials
            base, self.base = self.base, None
            self.inflight += 1
            return base
        while True:
            if self.pending:
                self.inflight += 1
                return self.pending.popleft()
            if self.asked >= self.budget:
                return None
            point = self._ask()
            if point is not None:
                self.inflight += 1
                return point

    def remaining(self) -> float | None:
        """Seconds left: the runs in flight and waiting, the trials not asked yet and their expected promotions
        (a rung promotes 1 in eta), each predicted from the runs that finished."""
        future = max(self.budget - self.asked, 0)
        eta = self.spec.fidelity.eta if self.spec.fidelity else 1
        extra = [(((_RUNG, r),), 1.0, future / eta ** r) for r in range(self.top + 1)]
        extra += [(_features(p, self.top), 1.0, 1.0) for p in self.pending]
        return self.eta.remaining(extra)

    def tick(self) -> None:
        self.progress(self.asked - len(self.live), self.budget, unit="trials")

    def exhausted(self) -> bool:
        return self.asked >= self.budget and not self.pending and self.inflight == 0 and self.base is None

    def _ask(self) -> TrialPoint | None:
        """A new candidate's first run; None if it was settled without simulating (rejected, invalid, cached)."""
        trial = self.study.ask()
        number, self.asked, self.next_trial = self.next_trial, self.asked + 1, self.next_trial + 1
        self.live[number] = trial
        params = self.spec.space.suggest(lambda p: p.suggest(trial))
        return self._point(number, 0, params)

    def _config(self, params: dict, rung: int) -> tuple[dict, list]:
        """The config a trial's run at ``rung`` asks for (the raw one, if it is invalid) and its issues."""
        overrides = list(params.items())
        cycles = rung_cycles(self.spec.fidelity.cycles, rung) if self.spec.fidelity else None
        if cycles is not None:
            overrides.append(("run.max_cycles", cycles))
        raw = apply_overrides(self.spec.base, overrides)
        cfg, issues = validate(raw, self.spec.command.schema())
        return (raw, issues) if issues else (cfg, issues)

    def _point(self, number: int, rung: int, params: dict) -> TrialPoint | None:
        cfg, issues = self._config(params, rung)
        cycles = rung_cycles(self.spec.fidelity.cycles, rung) if self.spec.fidelity else None
        fidelity = FULL if cycles is None else f"{CUT_FIDELITY}{cycles}"
        point = TrialPoint(number, trial_key(number, rung), params, cfg, number, rung, fidelity, self.optimizer,
                           params)
        why = "; ".join(str(i) for i in issues) or self._rejected(cfg)
        if why:
            self._settle(replace(point, fidelity=NOT_RUN), None, PointRun(STATUS_ERROR, 0, error=why))
            return None
        cached = self.cache.get(self.identity.point_id(cfg))
        if cached is not None:  # the same config ran before (the optimiser asked again): reuse its result
            name = self.spec.command.result
            self._settle(point, PointOutcome(STATUS_OK, {name: cached}, "cache"), PointRun(STATUS_OK, 0, "cache", 0.0))
            return None
        return point

    def _rejected(self, cfg: dict) -> str:
        """Why a known constraint on config keys rejects this config ('' if none does)."""
        for k in self.spec.constraints:
            if not k.on_config:
                continue
            try:
                if not k.constraint.holds(lambda key: get_path(cfg, key)):
                    return f"known constraint violated: {k.constraint.text}"
            except (TypeError, ValueError, ArithmeticError) as exc:
                return f"known constraint {k.constraint.text!r} could not be evaluated: {exc}"
        return ""

    # ------------------------------------------------------------------ finished runs
    def done(self, point: Point, outcome: PointOutcome | None, run: PointRun) -> None:
        self.eta.finished(point.id, run.seconds)
        if isinstance(point, BasePoint):
            self.inflight -= 1
            tables = outcome.tables if outcome is not None and run.status == STATUS_OK else None
            result = tables[pick_result(tables, self.spec.command.result)] if tables else None
            self.base_row = write_base(self.store.layout.root, result, point, run.error)
            self.log(f"explore: the base config's run {self.base_row.get('status') or 'failed'}"
                     + (f": {run.error}" if run.error else ""))
            return
        assert isinstance(point, TrialPoint)  # the executor hands back the points this feed gave it
        self.inflight -= 1
        self.computed += 1
        self._settle(point, outcome, run)
        self.progress(self.asked - len(self.live), self.budget, unit="trials")
        if run.status != STATUS_OK:
            self.log(f"trial {point.trial} (rung {point.rung}) failed: {run.error}")

    def _settle(self, point: TrialPoint, outcome: PointOutcome | None, run: PointRun) -> None:
        """Store a finished (or rejected, or cached) run, then tell the optimiser or promote the trial."""
        tables = outcome.tables if outcome is not None and run.status == STATUS_OK else None
        row = tables[pick_result(tables, self.spec.command.result)] if tables else None
        verdict = self._judge(point, row)
        stored = self.store.write(replace(point, feasible=verdict.feasible, fidelity=verdict.fidelity), tables, run)
        feasible = verdict.feasible and stored.status == STATUS_OK
        if row is not None and stored.status == STATUS_OK:
            self.cache.setdefault(self.identity.point_id(point.config), row)
        self._record(point, stored)
        if verdict.final or not feasible:
            self._tell(point.trial, verdict.values if feasible and verdict.fidelity == FULL else None,
                       not violated(verdict.fidelity, feasible, verdict.status if stored.status == STATUS_OK else None))
            return
        losses = as_losses(np.array(verdict.values), self.maximize)[0]
        self.rungs[point.rung].append(losses)
        if promoted(losses, self.rungs[point.rung], self.spec.fidelity.eta if self.spec.fidelity else 1):
            nxt = self._point(point.trial, point.rung + 1, point.params)
            if nxt is not None:
                self.pending.append(nxt)
        else:
            self._tell(point.trial, None, True)

    def _judge(self, point: TrialPoint, row: pa.Table | None) -> Verdict:
        if point.fidelity == NOT_RUN or row is None or not row.num_rows:
            return Verdict(False, point.fidelity, True, None, None)
        first = row.slice(0, 1).to_pylist()[0]
        status = first.get("status") or FEASIBLE_STATUS  # a command without a status column: it finished
        values = tuple(float(v) if isinstance(v, (int, float)) else math.nan
                       for v in (first.get(o.metric) for o in self.spec.objectives))
        numbers = all(math.isfinite(v) for v in values)
        if point.rung < self.top and status == CUT_STATUS:
            return Verdict(numbers, point.fidelity, not numbers, values if numbers else None, status)
        feasible = status == FEASIBLE_STATUS and numbers and self._metrics_hold(first, point.config)
        return Verdict(feasible, FULL if status == FEASIBLE_STATUS else point.fidelity, True,
                       values if numbers else None, status)

    def _metrics_hold(self, row: dict, cfg: dict) -> bool:
        """Whether every constraint on result metrics holds for this row (config keys read from its config)."""
        lookup = lambda key: row[key] if key in row else get_path(cfg, key)  # noqa: E731
        try:
            return all(k.constraint.holds(lookup) for k in self.spec.constraints if not k.on_config)
        except (TypeError, ValueError, ArithmeticError):
            return False

    def _tell(self, number: int, values: tuple[float, ...] | None, feasible: bool) -> None:
        trial = self.live.pop(number, None)
        if trial is None:  # a promotion of a trial rebuilt from a rerun is not live: nothing to tell
            return
        trial.set_constraint(INFEASIBLE, 0.0 if feasible else 1.0)
        if values is not None:
            self.study.tell(trial, list(values))
        else:
            self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)

    def _record(self, point: TrialPoint, run: PointRun) -> None:
        m = self.manifest
        m.points[point.id] = PointEntry(point.trial, point.params, str(self.store.path(point).relative_to(
            self.store.layout.root)), DONE if run.status == STATUS_OK else FAILED, run.attempts, run.seconds,
            run.error, [m.specs[-1]["hash"]])
        last = m.runs[-1]
        last.computed += 1
        last.failed += run.status != STATUS_OK
        if time.monotonic() - self.saved_at > MANIFEST_EVERY_SECONDS:
            m.save(self.store.layout.manifest)
            self.saved_at = time.monotonic()


_RUNG = "rung"


def _features(point: Point, top: int) -> tuple:
    """What a run's cost is learned by: its rung (a cut run is cheap) and its parameters' values."""
    if isinstance(point, TrialPoint):
        return ((_RUNG, point.rung),) + tuple((k, str(v)) for k, v in sorted(point.params.items()))
    return ((_RUNG, top),)  # the base config's own run: in full


def _previous(spec: ExploreSpec, layout: DatasetLayout, replace_it: bool) -> tuple[Manifest | None, ExploreSpec]:
    """The stored manifest of this exploration in DIR (None to start afresh), after checking it is the same
    question, and ``spec`` under the hash DIR knows it by (known.py)."""
    if replace_it:
        for d in [layout.dataset, *layout.table_dirs().values()]:
            if d.is_dir():
                shutil.rmtree(d)
        layout.manifest.unlink(missing_ok=True)
        (layout.root / PARETO_FILE).unlink(missing_ok=True)
        (layout.root / BASE_FILE).unlink(missing_ok=True)
        return None, spec
    if not layout.manifest.is_file():
        if layout.dataset.is_dir() and any(layout.dataset.rglob("*.parquet")):
            raise UserError(f"{str(layout.dataset)!r} holds trials without their manifest: rerun with --replace "
                            "or use another --out")
        return None, spec
    old = Manifest.load(layout.manifest)
    known = stored_hash(spec, old)
    if known is None:
        raise UserError(f"{str(layout.root)!r} holds an exploration of another space, objectives, constraints or "
                        f"base config (spec {old.spec_hashes()[-1:] or '?'}; this one is {spec.spec_hash}): rerun "
                        "with --replace to start again, or use another --out")
    return old, replace(spec, sweep=replace(spec.sweep, spec_hash=known))


def _manifest(spec: ExploreSpec, old: Manifest | None) -> Manifest:
    m = Manifest(sweep=spec.sweep.spec.name, command=spec.command.name, description=spec.description,
                 spec=spec.sweep.spec.raw, spec_path=str(spec.source),
                 columns={f.name: str(f.type) for f in spec.sweep.axes.fields},
                 partition_by=[], created=old.created if old else now(), runs=old.runs if old else [],
                 points=dict(old.points) if old else {}, specs=list(old.specs) if old else [],
                 result_table=spec.command.result)
    if spec.spec_hash not in m.spec_hashes():
        m.specs.append({"hash": spec.spec_hash, "text": spec.sweep.spec.text, "base": spec.base,
                        "source": str(spec.source), "added": now()})
    return m


def run_explore(spec: ExploreSpec, out: str | Path, opts: Options = Options()) -> ExploreSummary:
    """Explore into ``out`` until ``budget`` trials are stored (those already there count)."""
    start = time.perf_counter()
    budget = opts.budget if opts.budget is not None else spec.budget
    if budget < 1:
        raise UserError(f"--budget must be at least 1 trial, got {budget}")
    if opts.parallel is not None and opts.parallel < 1:
        raise UserError(f"parallel = {opts.parallel}: must be at least 1")
    io.check_dir(out, "out")  # before Ray starts
    name = opts.optimizer or spec.optimizer
    if name not in OPTIMIZERS:
        raise UserError(f"unknown optimizer {name!r}; known: {', '.join(OPTIMIZERS)}")
    if OPTIMIZERS[name].finite_only:
        if spec.space.size() == math.inf:
            raise UserError(f"optimizer {name} needs a finite space: give each real parameter values (ordinal)")
        budget = min(budget, int(spec.space.size()))
    layout = DatasetLayout(Path(out), spec.sweep.spec.name, result=spec.command.result)
    old, spec = _previous(spec, layout, opts.replace)
    store = TrialStore(spec.sweep, layout)
    remove_orphans(layout)
    metrics = [o.metric for o in spec.objectives]
    runs, stored = read_runs(layout.dataset, metrics)
    before = len({r.trial for r in runs})
    with optuna_quiet():
        study = _study(spec, name, spec.seed if opts.seed is None else opts.seed, budget)
        rebuild(study, spec, runs)
        manifest = _manifest(spec, old)
        code = code_version()
        run = RunEntry(now(), socket.gethostname(), os.getpid(), opts.address, code.version,
                       to_run=max(0, budget - before), skipped=before,
                       spec_hash=spec.spec_hash, code=code.to_json(), code_label=code.label)
        manifest.runs.append(run)
        manifest.save(layout.manifest)
        log = (lambda msg: None) if opts.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
        log(f"explore: {before} trials stored, {run.to_run} to run with {name} "
            f"(budget {budget})")
        base = base_point(spec) if spec.reference is None else None
        base_row = read_base(layout.root, base, earlier_base_id(spec, old))
        explorer = Explorer(spec, study, store, manifest, runs, stored, budget, name, log, None,
                            base if base_row is None else None)
        progress = explorer.progress = Progress("explore", opts.quiet, eta=explorer.remaining)
        try:
            _execute(spec, explorer, opts)
            run.state = "finished"
        except BaseException:
            run.state = "interrupted"
            raise
        finally:
            progress.close()
            run.ended = now()
            manifest.save(layout.manifest)
    runs, stored = read_runs(layout.dataset, metrics)
    front = find_front(spec.objectives, runs, spec.reference, base_row or explorer.base_row)
    if stored is not None:
        writer.write_table(pareto_table(front, stored), layout.root / PARETO_FILE)
    return ExploreSummary(front, before, explorer.computed, time.perf_counter() - start,
                          Path(out), tally(spec, stored))


def _execute(spec: ExploreSpec, explorer: Explorer, opts: Options) -> None:
    from cluster.sweep.execute import Executor, InProcessExecutor

    executor: Executor | InProcessExecutor
    if opts.in_process:
        executor = InProcessExecutor(spec.command.name)
    else:
        from cluster.parallel.ray_env import init_ray

        executor = Executor(init_ray(opts.address), spec.command.name, spec.max_retries,
                            opts.parallel or spec.parallel)
        explorer.eta.parallel = max(1, min(opts.parallel or spec.parallel, int(executor.cluster_cpus()) or 1))
    executor.run(explorer, explorer.done, explorer.tick)

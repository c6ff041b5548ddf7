"""How many shards pay (``run.shards = "auto"``), decided for at most a twentieth of the run.

A run of ``C`` cycles cut into ``n`` shards on ``a = min(n, cores)`` actors takes about

    C x (busiest actor's share of the work x r1 + epochs per cycle x per-epoch cost) + start

where ``r1`` is one process's seconds per cycle, an actor's share is what its shards do of the
whole (shards wait for each other every epoch, so the busiest sets the pace), the per-epoch
cost is an actor's own bookkeeping (EPOCH_SECONDS: its earliest output, splitting and packing
its traffic) and the exchange (EXCHANGE_SECONDS per peer), and the start is what Ray actors pay
before their first epoch (ACTOR_START_SECONDS). ``C`` is the run's expected length (the NoC's
warm-up and measurement; a chip run's cycle limit, which makes a long run of it the assumption).

Deciding must cost next to nothing against the run it decides, so the run starts in this process
(its opening) and keeps going there while one process is the answer: a run that ends within its
opening is done, and one that keeps one process goes on from where the opening stopped, having
paid nothing for the decision. The opening runs in stretches of OPENING_SECONDS; after each, the
decomposition's own figures (``MeasuresCuts``) say what each candidate cut would have split in
that stretch: each region's share of the work (the flits through its routers) and the traffic
that crossed between regions; the constants, measured on a quiet machine, are stretched as
much as the opening's wall-clock time exceeded its CPU time (a shared machine's load slows
exchanges and actors' starts at least as much). Every window of a cut is at least its lookahead and at most
MAX_WINDOW cycles long, and a packet that crosses the cut ends one (it may not leave and arrive
within one window): the crossings place the epochs between those bounds. A count loses when
even free exchanges (MAX_WINDOW windows) cannot gain FREE_GAIN or its crossings say it gains
less than MARGIN; when every count loses, the run goes on in one process. Otherwise the opening
goes on, each stretch judged afresh (a run's first cycles may cost more than its later ones),
until it has cost DECISION_SHARE of the run it predicts; then a count that gains MARGIN even
with windows of one lookahead (the worst case) runs, and a count between the bounds is piloted
briefly in this process (its shards over the run's first cycles, at most PILOT_SECONDS), as
every count of a decomposition without figures is.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

from cluster.parallel.epochs import MAX_WINDOW
from cluster.parallel.groups import actor_groups
from cluster.parallel.local import LocalRun
from cluster.parallel.model import CutFigures, Decomposition, MeasuresCuts, ProgressFn

# What an epoch's exchange costs an actor per peer: two trivial actors exchanging directly over
# their channels took 25-50 us on the 2-core machine (benchmarks/chaining_speed.py). A constant,
# not measured per run: spawning actors to measure it cost ~1 s, more than it told.
EXCHANGE_SECONDS = 5e-5
# An actor's own work per epoch besides advancing its shard: its earliest output, splitting and
# packing its traffic (~0.1-0.15 ms on chip runs, docs/design.md "What an epoch costs").
EPOCH_SECONDS = 1.5e-4
# What Ray shard actors pay before their first epoch, for the models that plan (a NoC grid, a
# chip): their process and imports, unpickling the model, building the shard and loading the
# compiled kernels on the first epoch. Measured on the 2-core machine: 0.8 s for a 64x64 NoC
# (a cold run 4.07 s against a warm one 3.29 s), 0.6 s for the moe example's chip. (A system of
# 8 grid chips pays 2.6 s, but systems take no plan.)
ACTOR_START_SECONDS = 1.0
OPENING_SECONDS = 0.3  # of simulation in one process before deciding (kept when one process wins)
WARM_UP_CYCLES = 64  # the opening's first window, not timed: it loads the compiled kernels
PACE_SECONDS = 0.02  # the longest window while a run must stop in time (a pilot, an opening's stretch)
MARGIN = 1.25  # a count other than one process runs only when predicted this much faster
FREE_GAIN = 1.1  # a count that cannot gain this even with free exchanges is not tried
DECISION_SHARE = 0.05  # the most a decision may cost of the (predicted) run it decides
PILOT_SECONDS = 0.5  # a cut's pilot at most


@dataclass(frozen=True)
class Prediction:
    """What the cost model expects of one shard count."""

    shards: int
    seconds_per_kcycle: float  # predicted wall seconds per 1,000 simulated cycles
    speedup: float  # against one process (itself measured by the opening)
    window_mean: float  # cycles per epoch (estimated from the cut's traffic, or a pilot's)
    largest_share: float | None = None  # of the work, the busiest actor's (from the cut's figures)

    def describe(self, backend: str) -> str:
        if self.shards == 1:
            return "1 process"
        cost = (f"{self.speedup:.2f}x of 1 process" if self.speedup >= 0.5
                else f"{1 / max(self.speedup, 1e-9):.1f}x slower than 1 process")
        share = "" if self.largest_share is None else f"the busiest actor {self.largest_share:.0%} of the work, "
        return f"{self.shards} shards on {backend}: predicted {cost} ({share}epochs of {self.window_mean:.1f} cycles)"


@dataclass(frozen=True)
class Plan:
    shards: int
    predictions: list[Prediction]
    reason: str
    seconds: float = 0.0  # what choosing took outside the run's own wall clock (a pilot; an opening not kept)

    @property
    def chosen(self) -> bool:
        """The count was chosen (run.shards = "auto"), not given: ``reason`` says why."""
        return self.reason.startswith("auto")

    def backend(self, requested: str) -> str:
        """One process chosen by "auto" runs in this process: a single actor would only add
        its start-up and a round trip per epoch."""
        return "local" if self.shards == 1 and self.chosen else requested

    def prediction(self, shards: int) -> Prediction | None:
        return next((p for p in self.predictions if p.shards == shards), None)


@dataclass
class Decision:
    """A plan and, when it keeps one process, the run's opening to go on with."""

    plan: Plan
    opening: LocalRun[Any, Any, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Pilot:
    """Per simulated cycle, from a pilot: the lockstep and all shards' seconds, epochs."""

    shards: int
    lockstep: float
    total: float
    epochs: float

    def predict(self, one: "Pilot", cores: float, cycles: int, stretch: float = 1.0) -> Prediction:
        """What this count is expected to take over ``cycles`` against ``one`` process: shards
        beyond the cores share their actors, one a core (cluster/parallel/groups.py); ``stretch``
        as ``judge``'s."""
        n = self.shards
        actors = actors_for(n, cores)
        t = max(self.lockstep, self.total / actors) + self.epochs * EXCHANGE_SECONDS * stretch * (actors - 1)
        start = ACTOR_START_SECONDS * stretch if n > 1 else 0.0
        return Prediction(n, t * 1e3, one.total * cycles / (t * cycles + start), 1 / self.epochs)


@dataclass(frozen=True)
class Verdict:
    """What a cut's figures say of its count: predicted speed-ups with the fewest epochs a cut
    can take, with the epochs its crossing traffic suggests, and with windows of one lookahead."""

    best: Prediction  # the figures' estimate
    optimistic: float
    pessimistic: float

    @property
    def settled(self) -> bool:
        return self.loses or self.pessimistic >= MARGIN

    @property
    def loses(self) -> bool:
        return self.optimistic < FREE_GAIN or self.best.speedup < MARGIN


def actors_for(shards: int, cores: float) -> int:
    """The Ray actors that run ``shards`` shards: one a shard, one a core at most."""
    return max(1, min(shards, int(cores)))


def judge(fig: CutFigures, lookahead: int, r1: float, cores: float, cycles: int, stretch: float = 1.0) -> Verdict:
    """The verdict of ``fig`` on its count (``len(fig.shares)`` shards) for a run of ``cycles``
    cycles of ``r1`` seconds each in one process, the cut's windows at least ``lookahead``.
    ``stretch``: how much longer than its CPU time the opening took (a shared machine's load):
    the constants, measured on a quiet machine, stretch as much (at the least)."""
    n = len(fig.shares)
    actors = actors_for(n, cores)
    share = max(sum(fig.shares[j] for j in g) for g in actor_groups(n, actors))
    per_epoch = (EPOCH_SECONDS + EXCHANGE_SECONDS * (actors - 1)) * stretch
    start = ACTOR_START_SECONDS * stretch
    low, high = 1 / MAX_WINDOW, 1 / max(lookahead, 1)
    crossing = min(max(fig.crossings / max(fig.cycles, 1), low), high)

    def seconds_per_cycle(epochs: float) -> float:
        return share * r1 + epochs * per_epoch

    def speedup(epochs: float) -> float:
        return r1 * cycles / (seconds_per_cycle(epochs) * cycles + start)

    best = Prediction(n, seconds_per_cycle(crossing) * 1e3, speedup(crossing), 1 / crossing, share)
    return Verdict(best, speedup(low), speedup(high))


def candidates_for(job: Decomposition[Any, Any, Any], cut: str, cores: float) -> list[int]:
    """1, and every count up to the cores that the cut can make."""
    out = [1]
    for n in range(2, max(int(cores), 1) + 1):
        try:
            job.regions(n, cut)
        except Exception:  # noqa: BLE001 - a count the cut cannot make is no candidate
            continue
        out.append(n)
    return out


def open_run(job: Decomposition[Any, Any, Any], progress: ProgressFn | None = None,
             epoch: int | None = None) -> LocalRun[Any, Any, Any]:
    """The run whole in this process (windows of ``epoch`` cycles), through its first short window
    (which loads its compiled kernels: not what a cycle costs)."""
    one = job.regions(1, "rows")
    e, _ = job.epoch(one, epoch)
    run = LocalRun(job.model(one), one, e, progress)
    run.run(until=WARM_UP_CYCLES, max_window=WARM_UP_CYCLES)
    return run


@dataclass(frozen=True)
class Mark:
    """Where a run in one process stood: cycles simulated, seconds advancing, and per candidate
    count what it has seen of that count's cut; with the clock and the process's CPU time."""

    cycles: int
    busy: float
    cuts: dict[int, CutFigures]
    wall: float = field(default_factory=time.perf_counter)
    cpu: float = field(default_factory=time.process_time)

    def rate(self, earlier: "Mark") -> float:
        """One process's seconds per cycle since ``earlier``."""
        return (self.busy - earlier.busy) / max(self.cycles - earlier.cycles, 1)

    def stretch(self, earlier: "Mark") -> float:
        """How much longer than its CPU time this process took since ``earlier`` (1: a core of its own)."""
        return max(1.0, (self.wall - earlier.wall) / max(self.cpu - earlier.cpu, 1e-9))


def pilot_cut(job: Decomposition[Any, Any, Any], shards: int, cut: str, budget: float) -> Pilot:
    """``shards`` shards of the cut, in this process, for ``budget`` seconds of simulation: per
    cycle, the lockstep path, all shards' work and the epochs."""
    regions = job.regions(shards, cut)
    e, _ = job.epoch(regions, None)
    run = LocalRun(job.model(regions), regions, e)
    run.run(budget=budget, pace=PACE_SECONDS)
    cycles = max(run.reached, 1)
    total = sum(b + x for b, x in zip(run.busy, run.exchange))
    return Pilot(shards, run.lockstep / cycles, total / cycles, run.epochs / cycles)


def plan_shards(requested: int | str, job: Decomposition[Any, Any, Any], cut: str, backend: str,
                address: str | None = None) -> Plan:
    """The shard count to run ``job`` on (``decide``, its opening not kept: a curve of loads
    plans once for all of them)."""
    d = decide(requested, job, cut, backend, address)
    if d.opening is not None:
        return replace(d.plan, seconds=d.plan.seconds + time.perf_counter() - d.opening.start)
    return d.plan


def decide(requested: int | str, job: Decomposition[Any, Any, Any], cut: str, backend: str,
           address: str | None = None, progress: ProgressFn | None = None, epoch: int | None = None) -> Decision:
    """The shard count to run ``job`` on: the predicted fastest when ``requested`` is "auto";
    else ``requested``, with a one-line warning on stderr of its predicted cost when it is
    more than the cores. A count within the cores runs without a plan (a pilot cost 1.2-1.8 s
    of a 4 s run of a 64x64 NoC); ``lost_to_one_process`` says afterwards, from the run's own
    figures, when it did not pay."""
    if requested != "auto" and (requested == 1 or backend != "ray"):
        return Decision(Plan(int(requested), [], "requested"))
    if backend != "ray":
        return Decision(Plan(1, [], f"auto: 1 process (the {backend} backend runs shards one after another in this "
                             "process, so more of them only add exchanges; run.backend = \"ray\" runs them side by "
                             "side)"))
    cores = _cores(address)
    if requested != "auto" and int(requested) <= cores:
        return Decision(Plan(int(requested), [], "requested"))
    if requested == "auto":
        return choose_count(job, cut, cores, progress, epoch)
    return Decision(_warned(job, cut, int(requested), cores))


def choose_count(job: Decomposition[Any, Any, Any], cut: str, cores: float, progress: ProgressFn | None = None,
                 epoch: int | None = None) -> Decision:
    """The count "auto" runs ``job`` on with ``cores`` cores for Ray actors (module docstring): the
    run opens in this process, stretch by stretch of OPENING_SECONDS, until the figures say one
    process (it goes on from there) or the opening has cost DECISION_SHARE of the run it predicts."""
    counts = candidates_for(job, cut, cores)
    if counts == [1]:
        return Decision(Plan(1, [], f"auto: 1 process (a {cut} cut makes no other count on {cores:g} cores)"))
    cycles = job.expected_cycles
    opening = open_run(job, progress, epoch)
    regions: dict[int, list[Any]] = {}  # the candidate cuts, once the run outlasts a stretch
    lookahead: dict[int, int] = {}

    def mark() -> Mark:
        cuts = ({n: job.cut_figures(opening.shard, r) for n, r in regions.items()} if isinstance(job, MeasuresCuts)
                else {})
        return Mark(opening.reached, sum(opening.busy), cuts)

    verdicts: dict[int, Verdict] = {}
    load = 1.0
    last = mark()
    while True:  # stretch by stretch, until the figures say one process, or the stretches cost their share
        if opening.run(budget=OPENING_SECONDS, pace=PACE_SECONDS):
            return Decision(Plan(1, [], "auto: 1 process (the run ended within its opening)"), opening)
        if not regions:
            regions.update({n: job.regions(n, cut) for n in counts[1:]})
            lookahead.update({n: job.epoch(r, None)[1] or 1 for n, r in regions.items()})
        now = mark()
        r1 = now.rate(last)
        load = now.stretch(last)
        verdicts = {n: judge(f.since(last.cuts[n]) if n in last.cuts else f, lookahead[n], r1, cores, cycles, load)
                    for n, f in now.cuts.items()}
        if len(verdicts) < len(regions) or all(v.loses for v in verdicts.values()):
            break
        if time.perf_counter() - opening.start >= DECISION_SHARE * r1 * cycles:
            break
        last = now
    one = Prediction(1, r1 * 1e3, 1.0, float(opening.epoch))  # one process: windows of its epoch
    preds = {n: v.best for n, v in verdicts.items() if not v.loses}
    unsettled = [n for n in regions if n not in verdicts or not verdicts[n].settled]
    basis = "the cut's traffic"
    if unsettled:  # the figures cannot tell (or there are none): pilot those counts briefly
        budget = max(min(PILOT_SECONDS, DECISION_SHARE * r1 * cycles) / len(unsettled), 0.05)
        base = Pilot(1, r1, r1, 1 / max(one.window_mean, 1))
        preds.update({n: pilot_cut(job, n, cut, budget).predict(base, cores, cycles, load) for n in unsettled})
        basis = "a pilot"
    listed = sorted([*preds.values(), *(v.best for n, v in verdicts.items() if n not in preds)], key=lambda p: p.shards)
    ranked = sorted(preds.values(), key=lambda p: (-p.speedup, p.shards))
    best = ranked[0] if ranked and ranked[0].speedup >= MARGIN else one
    why = (f"auto: {best.describe('ray')} (from {basis})" if best.shards > 1 else
           f"auto: 1 process (from {basis}: {'; '.join(p.describe('ray') for p in listed)})")
    plan = Plan(best.shards, [one, *listed], why)
    if best.shards == 1:  # the run goes on from its opening: deciding is inside its wall clock
        return Decision(plan, opening)
    return Decision(replace(plan, seconds=time.perf_counter() - opening.start))


def _warned(job: Decomposition[Any, Any, Any], cut: str, shards: int, cores: float) -> Plan:
    """A count above the cores (a debugging habit on a laptop): say once what it costs."""
    opening = open_run(job)
    before = Mark(opening.reached, sum(opening.busy), {})
    opening.run(budget=OPENING_SECONDS, pace=PACE_SECONDS)
    r1 = Mark(opening.reached, sum(opening.busy), {}).rate(before)
    base = Pilot(1, r1, r1, 1.0)
    p = pilot_cut(job, shards, cut, PILOT_SECONDS).predict(base, cores, job.expected_cycles)
    print(f"rdasim: warning: {shards} shards on {cores:g} cores run on {actors_for(shards, cores)} actors; "
          f"{p.describe('ray')}; run.shards = \"auto\" chooses among 1 to {max(int(cores), 1)}", file=sys.stderr)
    return Plan(shards, [Prediction(1, r1 * 1e3, 1.0, 1.0), p], "requested")


def _cores(address: str | None) -> float:
    from cluster.parallel.ray_env import cluster_cpus, init_ray

    init_ray(address)
    return cluster_cpus()

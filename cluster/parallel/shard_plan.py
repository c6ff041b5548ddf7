"""How many shards pay (``run.shards = "auto"``): a cost model fitted to a pilot of the run.

A run of ``C`` cycles cut into ``n`` shards on ``cores`` cores takes about

    C x (max(lockstep work, all shards' work / cores) + epochs per cycle x exchange) + start

per simulated cycle, where a shard's work is advancing its region plus its own bookkeeping
(earliest output, routing its traffic), the lockstep work is the sum over epochs of the
slowest shard's epoch (shards wait for each other every epoch, so an imbalance that
alternates between shards costs as much as a steady one), the exchange is what an epoch
costs between actors (EXCHANGE_SECONDS per peer) and the start is what Ray actors pay
before their first epoch (ACTOR_START_SECONDS). Work and epochs per cycle depend on the
workload and the cut (how often traffic comes near it, cluster/parallel/epochs.py), so they are
measured: a pilot simulates the run's first cycles in this process, once whole and once cut
into each candidate count, and the model above extrapolates from them. The pilot covers the
start of the run only; a workload whose traffic changes later is predicted from its opening.
``C`` is the run's expected length (the NoC's measurement window; a chip run's cycle limit,
which makes a long run of it the assumption).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace

from cluster.parallel.local import run_local
from cluster.parallel.model import Decomposition

# What an epoch's exchange costs an actor per peer: two trivial actors exchanging directly over
# their channels took 25-50 us on the 2-core machine (benchmarks/chaining_speed.py). A constant,
# not measured per run: spawning actors to measure it cost ~1 s, more than it told.
EXCHANGE_SECONDS = 5e-5
# What Ray shard actors pay before their first epoch, for the models that pilot (a NoC grid, a
# chip): their process and imports, unpickling the model, building the shard and loading the
# compiled kernels on the first epoch. Measured on the 2-core machine: 0.8 s for a 64x64 NoC
# (a cold run 4.07 s against a warm one 3.29 s), 0.6 s for the moe example's chip. (A system of
# 8 grid chips pays 2.6 s, but systems take no pilot.)
ACTOR_START_SECONDS = 1.0
PILOT_CYCLES = 8192  # at most; a sixteenth of the run's horizon when that is shorter
PILOT_SECONDS = 0.25  # of simulation in the one-process pilot at most; the cut ones run as many cycles
WARM_UP_CYCLES = 64
BUDGET_STEP = 128  # cycles between looks at the one-process pilot's clock


@dataclass(frozen=True)
class Prediction:
    """What the cost model expects of one shard count."""

    shards: int
    seconds_per_kcycle: float  # predicted wall seconds per 1,000 simulated cycles
    speedup: float  # against one process (itself measured by the pilot)
    window_mean: float  # cycles per epoch in the pilot

    def describe(self, backend: str) -> str:
        if self.shards == 1:
            return "1 process"
        cost = (f"{self.speedup:.2f}x of 1 process" if self.speedup >= 0.5
                else f"{1 / max(self.speedup, 1e-9):.1f}x slower than 1 process")
        return f"{self.shards} shards on {backend}: predicted {cost} (epochs of {self.window_mean:.1f} cycles)"


@dataclass(frozen=True)
class Plan:
    shards: int
    predictions: list[Prediction]
    reason: str
    seconds: float = 0.0  # what choosing took (the pilots)

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


def _pilot(job: Decomposition, shards: int, cut: str, until: int,
           budget: float | None = None) -> tuple[float, float, float, int]:
    """(lockstep seconds, total shard seconds, epochs), each per cycle, and the cycles run:
    ``until`` cycles or ``budget`` seconds of simulation."""
    regions = job.regions(shards, cut)
    e, _ = job.epoch(regions, None)
    step = None if budget is None else min(e, BUDGET_STEP)  # one process: windows short enough to stop in time
    o = run_local(job.model(regions), regions, step or e, until=until, budget=budget, max_window=step)
    cycles = max(o.end_cycle, 1)
    per = [b + x for b, x in zip(o.extra["shard_busy_seconds"], o.extra["exchange_seconds"])]
    return o.extra["lockstep_seconds"] / cycles, sum(per) / cycles, o.epochs / cycles, o.end_cycle


@dataclass(frozen=True)
class Pilot:
    """Per simulated cycle, from a pilot: the lockstep and all shards' seconds, epochs."""

    shards: int
    lockstep: float
    total: float
    epochs: float

    def predict(self, one: "Pilot", cores: float, cycles: int) -> Prediction:
        """What this count is expected to take over ``cycles`` against ``one`` process: shards
        beyond the cores share their actors, one a core (cluster/parallel/groups.py)."""
        n = self.shards
        actors = actors_for(n, cores)
        t = max(self.lockstep, self.total / actors) + self.epochs * EXCHANGE_SECONDS * (actors - 1)
        start = ACTOR_START_SECONDS if n > 1 else 0.0
        return Prediction(n, t * 1e3, one.total * cycles / (t * cycles + start), 1 / self.epochs)


def actors_for(shards: int, cores: float) -> int:
    """The Ray actors that run ``shards`` shards: one a shard, one a core at most."""
    return max(1, min(shards, int(cores)))


def pilots(job: Decomposition, cut: str, candidates: list[int]) -> list[Pilot]:
    """Pilot 1 process and each candidate count over the run's first cycles (as many as
    one process simulates in PILOT_SECONDS, at most)."""
    until = max(min(PILOT_CYCLES, job.horizon // 16), 64)
    # a first call of a compiled kernel loads it (~0.1 s each): not the run's cost per cycle;
    # the most shards call every kernel the others do
    most = job.regions(max(candidates), cut)
    e, _ = job.epoch(most, None)
    run_local(job.model(most), most, min(e, WARM_UP_CYCLES), until=WARM_UP_CYCLES, max_window=WARM_UP_CYCLES)
    *one, until = _pilot(job, 1, cut, until, PILOT_SECONDS)
    return [Pilot(1, *one)] + [Pilot(n, *_pilot(job, n, cut, until)[:3]) for n in sorted(set(candidates) - {1})]


def predict(ps: list[Pilot], cores: float, cycles: int) -> list[Prediction]:
    return [p.predict(ps[0], cores, cycles) for p in ps]


def candidates_for(job: Decomposition, cut: str, cores: float) -> list[int]:
    """1, and every count up to the cores that the cut can make."""
    out = [1]
    for n in range(2, max(int(cores), 1) + 1):
        try:
            job.regions(n, cut)
        except Exception:  # noqa: BLE001 - a count the cut cannot make is no candidate
            continue
        out.append(n)
    return out


def plan_shards(requested: int | str, job: Decomposition, cut: str, backend: str,
                address: str | None = None) -> Plan:
    """The shard count to run ``job`` on: the predicted fastest when ``requested`` is "auto";
    else ``requested``, with a one-line warning on stderr of its predicted cost when it is
    more than the cores. A count within the cores runs without a pilot (it cost 1.2-1.8 s of
    a 4 s run of a 64x64 NoC); ``lost_to_one_process`` says afterwards, from the run's own
    figures, when it did not pay."""
    start = time.perf_counter()
    plan = _choose(requested, job, cut, backend, address)
    return replace(plan, seconds=time.perf_counter() - start)


def _choose(requested: int | str, job: Decomposition, cut: str, backend: str, address: str | None) -> Plan:
    if requested != "auto" and (requested == 1 or backend != "ray"):
        return Plan(int(requested), [], "requested")
    if backend != "ray":
        return Plan(1, [], f"auto: 1 process (the {backend} backend runs shards one after another in this "
                    "process, so more of them only add exchanges; run.backend = \"ray\" runs them side by side)")
    cores = _cores(address)
    if requested != "auto" and int(requested) <= cores:
        return Plan(int(requested), [], "requested")
    wanted = candidates_for(job, cut, cores) if requested == "auto" else [int(requested)]
    preds = predict(pilots(job, cut, wanted), cores, job.expected_cycles)
    if requested == "auto":
        best = max(preds, key=lambda p: (p.speedup, -p.shards))
        others = "; ".join(p.describe(backend) for p in preds if p.shards != 1)
        return Plan(best.shards, preds, f"auto: {best.describe(backend) if best.shards > 1 else '1 process'}"
                    + (f" ({others})" if best.shards == 1 and others else ""))
    p = preds[-1]  # a debugging habit on a laptop: say once what it costs
    print(f"rdasim: warning: {p.shards} shards on {cores:g} cores run on {actors_for(p.shards, cores)} actors; "
          f"{p.describe(backend)}; run.shards = \"auto\" chooses among 1 to {max(int(cores), 1)}", file=sys.stderr)
    return Plan(int(requested), preds, "requested")


def _cores(address: str | None) -> float:
    from cluster.parallel.ray_env import cluster_cpus, init_ray

    init_ray(address)
    return cluster_cpus()

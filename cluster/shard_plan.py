"""How many shards pay (``run.shards = "auto"``): a cost model fitted to a pilot of the run.

Per simulated cycle, a run cut into ``n`` shards on ``cores`` cores takes about

    max(slowest shard's work, all shards' work / cores) + epochs per cycle x round trip

where a shard's work is advancing its region plus its own bookkeeping (earliest output,
routing its traffic), and the round trip is what the backend pays per epoch to move the
reports between processes (EPOCH_ROUND_TRIP). Work and epochs per cycle depend on the
workload and the cut (how often traffic comes near it, cluster/coordinator.py), so they
are measured: a pilot simulates the run's first cycles in this process, once whole and
once cut into each candidate count, and the model above extrapolates from them. The
pilot covers the start of the run only; a workload whose traffic changes later is
predicted from its opening.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from cluster.backends.local import run_local
from cluster.regions import cut_grid, epoch_length

# The least cost per epoch between Ray actors on one node: two trivial actors exchanging
# directly over their channels, 25-40 us on the 2-core machine (cluster/backends/
# ray_backend.py's note; a driver round trip 1.6 ms there, ~6 ms with the machine loaded).
# A count this floor already predicts slower is dropped without measuring; otherwise the
# exchange is measured (ray_backend.round_trip_seconds) under the machine's load of the moment.
ROUND_TRIP_FLOOR = 2.5e-5
PILOT_CYCLES = 8192  # at most; a sixteenth of the run's horizon when that is shorter
PILOT_SECONDS = 0.4  # of simulation in the one-process pilot at most; the cut ones run as many cycles
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
        return (f"{self.shards} shards on {backend}: predicted {self.speedup:.2f}x of 1 process "
                f"(epochs of {self.window_mean:.1f} cycles)")


@dataclass(frozen=True)
class Plan:
    shards: int
    predictions: list[Prediction]
    reason: str

    def backend(self, requested: str) -> str:
        """One process chosen by "auto" runs in this process: a single actor would only add
        its start-up and a round trip per epoch."""
        return "local" if self.shards == 1 and self.reason.startswith("auto") else requested

    def prediction(self, shards: int) -> Prediction | None:
        return next((p for p in self.predictions if p.shards == shards), None)


def _pilot(make_model, params, regions, until: int, budget: float | None = None) -> tuple[float, float, float, int]:
    """(max shard seconds, total shard seconds, epochs), each per cycle, and the cycles run:
    ``until`` cycles or ``budget`` seconds of simulation."""
    e, _ = epoch_length(params, regions, None)
    step = None if budget is None else min(e, BUDGET_STEP)  # one process: windows short enough to stop in time
    o = run_local(params, regions, step or e, model=make_model(regions), until=until, budget=budget, max_window=step)
    cycles = max(o.end_cycle, 1)
    per = [b + x for b, x in zip(o.extra["shard_busy_seconds"], o.extra["exchange_seconds"])]
    return max(per) / cycles, sum(per) / cycles, o.epochs / cycles, o.end_cycle


@dataclass(frozen=True)
class Pilot:
    """Per simulated cycle, from a pilot: the slowest shard's and all shards' seconds, epochs."""

    shards: int
    slowest: float
    total: float
    epochs: float

    def predict(self, one: "Pilot", cores: float, round_trip: float) -> Prediction:
        t = max(self.slowest, self.total / min(cores, self.shards)) + (self.epochs * round_trip if self.shards > 1
                                                                        else 0.0)
        return Prediction(self.shards, t * 1e3, one.total / t, 1 / self.epochs)


def pilots(make_model, params, rows: int, cols: int, cut: str, candidates: list[int], horizon: int) -> list[Pilot]:
    """Pilot 1 process and each candidate count over the run's first cycles (as many as
    one process simulates in PILOT_SECONDS, at most)."""
    until = max(min(PILOT_CYCLES, horizon // 16), 64)
    # a first call of a compiled kernel loads it (~0.1 s each): not the run's cost per cycle;
    # the most shards call every kernel the others do
    most = cut_grid(rows, cols, max(candidates), cut)
    e, _ = epoch_length(params, most, None)
    run_local(params, most, min(e, WARM_UP_CYCLES), model=make_model(most), until=WARM_UP_CYCLES,
              max_window=WARM_UP_CYCLES)
    *one, until = _pilot(make_model, params, cut_grid(rows, cols, 1, cut), until, PILOT_SECONDS)
    return [Pilot(1, *one)] + [Pilot(n, *_pilot(make_model, params, cut_grid(rows, cols, n, cut), until)[:3])
                               for n in sorted(set(candidates) - {1})]


def predict(ps: list[Pilot], cores: float, round_trip: float) -> list[Prediction]:
    return [p.predict(ps[0], cores, round_trip) for p in ps]


def candidates_for(rows: int, cols: int, cut: str, cores: float) -> list[int]:
    """1, and every count up to the cores that the cut can make."""
    out = [1]
    for n in range(2, max(int(cores), 1) + 1):
        try:
            cut_grid(rows, cols, n, cut)
        except Exception:  # noqa: BLE001 - a count the cut cannot make is no candidate
            continue
        out.append(n)
    return out


def plan_shards(requested, make_model, params, rows: int, cols: int, cut: str, backend: str, horizon: int,
                address: str | None = None) -> Plan:
    """The shard count to run: ``requested`` when it is a number (with a one-line warning on
    stderr when the model predicts it slower than one process on Ray), or the predicted
    fastest when it is "auto"."""
    if requested != "auto" and (requested == 1 or backend != "ray"):
        return Plan(int(requested), [], "requested")
    if backend != "ray":
        return Plan(1, [], "auto: 1 process (shards in one process run one after another)")
    cores = _cores(address)
    wanted = candidates_for(rows, cols, cut, cores) if requested == "auto" else [requested]
    ps = pilots(make_model, params, rows, cols, cut, wanted, horizon)
    preds = predict(ps, cores, ROUND_TRIP_FLOOR)
    if any(p.speedup >= 1.0 for p in preds[1:]):  # in doubt: measure what an epoch costs now
        from cluster.backends.ray_backend import round_trip_seconds

        preds = predict(ps, cores, round_trip_seconds(max(p.shards for p in ps), address))
    if requested == "auto":
        best = max(preds, key=lambda p: (p.speedup, -p.shards))
        others = "; ".join(p.describe(backend) for p in preds if p.shards != 1)
        return Plan(best.shards, preds, f"auto: {best.describe(backend) if best.shards > 1 else '1 process'}"
                    + (f" ({others})" if best.shards == 1 and others else ""))
    p = preds[-1]
    if p.speedup < 1.0:
        print(f"rdasim: warning: {p.describe(backend)}; run.shards = \"auto\" would run 1 process",
              file=sys.stderr)
    return Plan(int(requested), preds, "requested")


def _cores(address: str | None) -> float:
    from cluster.ray_env import cluster_cpus, init_ray

    init_ray(address)
    return cluster_cpus()


def distribution_figures(plan: Plan | None, outcome, plan_seconds: float = 0.0) -> dict:
    """Per-run figures of a distributed run (issue 11): windows, simulation against exchange
    time per shard, peak memory per shard, and the speed-up against the pilot's prediction
    of one process (only when a pilot ran)."""
    x = outcome.extra
    out = {"epochs": outcome.epochs, "window_mean": x.get("window_mean"), "window_median": x.get("window_median"),
           "chaining": x.get("chaining"),
           "simulate_seconds_per_shard": [round(b, 3) for b in x.get("shard_busy_seconds", [])],
           "exchange_seconds_per_shard": [round(b, 3) for b in x.get("exchange_seconds", [])]}
    if "waiting_seconds" in x:  # directly chained actors: of the exchange, waiting for the peers' epochs
        out["waiting_seconds_per_shard"] = [round(b, 3) for b in x["waiting_seconds"]]
    rss = x.get("peak_rss_bytes_per_shard") or ([x["peak_rss_bytes"]] if "peak_rss_bytes" in x else [])
    out["peak_rss_mb_per_shard"] = [round(b / 2**20, 1) for b in rss]
    one = plan.prediction(1) if plan is not None else None
    if plan is not None and one is not None:  # a pilot ran: its predictions start with one process
        mine = plan.prediction(plan.shards)
        predicted_one = one.seconds_per_kcycle * outcome.end_cycle / 1e3
        out.update(shards_reason=plan.reason, plan_seconds=round(plan_seconds, 3),
                   predicted_speedup=round(mine.speedup, 3) if mine else None,
                   predicted_one_process_seconds=round(predicted_one, 3),
                   speedup_vs_predicted_one_process=round(predicted_one / max(outcome.wall_seconds, 1e-9), 3))
    return out

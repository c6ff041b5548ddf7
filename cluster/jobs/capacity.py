"""The serving capacity of a decode config: its runs at each arrival-rate scale, over replicas.

A scale multiplies the arrival rate: with a trace, ``workload.decode.trace_speedup`` times it;
otherwise ``workload.decode.arrival_interval`` divided by it. One scale is decided by the pooled
samples of its replicas: every replica served every request (the run completed, none refused)
and the p99 TTFT and p99 TBT over all their requests and token gaps are within the objectives.

Replicas are there because a p99 of fewer than 101 samples is pulled towards the maximum
(serving.samples_beyond_the_maximum): a trace window of 64 requests is run as ``replicas``
copies whose samples are pooled, each copy

- ``jitter``: the trace with every arrival moved later by its own uniform draw in [0, jitter)
  (``workload.decode.trace_jitter``, default one mean gap of the window; seed ``run.seed + i``);
- ``windows``: the next window of the trace (``trace_start + i x trace_duration``);
- ``seeds``: drawn arrivals and lengths (no trace) with ``run.seed + i``.

The search itself is sim/serving/capacity.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, chip_config
from cluster.errors import UserError
from cluster.jobs.chip import simulate_chip
from sim.serving.capacity import Attainment
from sim.serving.metrics import (
    Objectives,
    RequestLog,
    meets_p99,
    request_columns,
    samples_beyond_the_maximum,
    served_latencies,
)
from sim.serving.trace import RequestTrace

REPLICA_KINDS = ("jitter", "windows", "seeds")
MAX_CYCLES = 10**9  # a slow scale spreads the same requests over many cycles: no cut-off before them


def rate_overrides(cfg: dict, scale: float) -> list[str]:
    """The --set lines that run ``cfg`` with its arrivals ``scale`` times as frequent."""
    d = cfg["workload"]["decode"]
    if d["trace"]:
        return [f"workload.decode.trace_speedup={d['trace_speedup'] * scale!r}"]
    if d["arrival_interval"] <= 0:
        raise UserError("the config's requests all arrive at once (workload.decode.arrival_interval = 0): "
                        "no rate to scale")
    return [f"workload.decode.arrival_interval={max(1, round(d['arrival_interval'] / scale))}"]


@dataclass(frozen=True)
class Replicas:
    """How one scale is run: ``count`` copies of the config, each with its ``overrides``."""

    kind: str
    count: int
    requests: int  # per copy
    overrides: tuple[tuple[str, ...], ...]
    jitter_seconds: float = 0.0  # kind "jitter": of the trace's own time

    @property
    def pooled(self) -> int:
        return self.count * self.requests


def plan_replicas(config: str, overrides: list[str], kind: str = "auto", count: int = 0,
                  min_samples: int | None = None, jitter_seconds: float = 0.0) -> Replicas:
    """The replicas of a config: ``count`` (0: the fewest whose pooled requests reach
    ``min_samples``, by default what a p99 needs to be more than the maximum) of ``kind``
    ("auto": jitter for a trace, seeds for drawn arrivals)."""
    cfg = load(RUN_SCHEMA, config, overrides)
    d, seed = cfg["workload"]["decode"], cfg["run"]["seed"]
    trace: RequestTrace | None = getattr(chip_config(cfg).workload, "trace", None) if d["trace"] else None
    n = len(trace.arrivals) if trace is not None else d["requests"]
    if kind == "auto":
        kind = "jitter" if trace is not None else "seeds"
    if kind not in REPLICA_KINDS:
        raise UserError(f"replicas {kind!r}: expected one of {', '.join(REPLICA_KINDS)} or auto")
    if kind != "seeds" and trace is None:
        raise UserError(f"replicas by {kind} need a trace (workload.decode.trace); drawn arrivals replicate by seeds")
    need = samples_beyond_the_maximum(99) if min_samples is None else min_samples
    count = count or max(1, math.ceil(need / max(1, n)))
    if count == 1:
        return Replicas(kind, 1, n, ((),))
    if kind == "seeds":
        return Replicas(kind, count, n, tuple((f"run.seed={seed + i}",) for i in range(count)))
    if kind == "windows":
        if not d["trace_duration"]:
            raise UserError("replicas by windows need workload.decode.trace_duration (the window to repeat)")
        return Replicas(kind, count, n, tuple(
            (f"workload.decode.trace_start='{d['trace_start'] + i * d['trace_duration']!r}s'",) for i in range(count)))
    assert trace is not None  # jitter needs a trace (checked above)
    # one mean gap between arrivals, in the trace's own time (span_seconds is simulated: after the speed-up)
    gap = trace.span_seconds * d["trace_speedup"] / (n - 1) if n > 1 else 0.0
    jitter = jitter_seconds or gap
    if jitter <= 0:
        raise UserError("replicas by jitter need a jitter above 0 (the window has one arrival time)")
    return Replicas(kind, count, n, tuple((f"run.seed={seed + i}", f"workload.decode.trace_jitter='{jitter!r}s'")
                                          for i in range(count)), jitter)


@dataclass
class ScaleRuns:
    """The replicas' runs at one scale, pooled."""

    statuses: list[str] = field(default_factory=list)
    failed: int = 0
    logs: list[RequestLog] = field(default_factory=list)
    clock_hz: float = 0.0


def run_scale(config: str, overrides: list[str], replicas: Replicas, scale: float) -> ScaleRuns:
    """Every replica of ``config`` at ``scale`` (run.max_cycles 10^9 unless ``overrides`` set it)."""
    base = load(RUN_SCHEMA, config, overrides)
    cap = [] if any(o.split("=", 1)[0].strip() == "run.max_cycles" for o in overrides) else \
        [f"run.max_cycles={MAX_CYCLES}"]
    out = ScaleRuns()
    for extra in replicas.overrides:
        cfg = load(RUN_SCHEMA, config, cap + overrides + rate_overrides(base, scale) + list(extra))
        chip = chip_config(cfg)
        done = simulate_chip(chip)
        out.statuses.append(done.summary["status"])
        out.failed += done.summary.get("requests_failed") or 0
        out.logs += [x for r in done.simulation.outcome.reports for x in r.logged if isinstance(x, RequestLog)]
        out.clock_hz = chip.spec.clock_hz
    return out


def attainment(scale: float, runs: ScaleRuns, slo: Objectives) -> Attainment:
    """Whether the pooled runs meet the objectives at p99, with the figures that decided it."""
    ttft, tbt = served_latencies(runs.logs, runs.clock_hz)
    p99 = {name: float(np.percentile(x, 99)) if len(x) else None for name, x in (("ttft", ttft), ("tbt", tbt))}
    pooled = {"completed": all(s == "completed" for s in runs.statuses), "requests_failed": runs.failed,
              "ttft_p99_seconds": p99["ttft"], "tbt_p99_seconds": p99["tbt"]}
    met = meets_p99(pooled, slo)  # the replicas as one run
    within = int(np.count_nonzero(request_columns(runs.logs, runs.clock_hz, slo)["meets_slo"]))
    return Attainment(scale, bool(met), {
        "statuses": runs.statuses, "requests": len(runs.logs), "served": int(len(ttft)), "failed": runs.failed,
        "ttft_p99_seconds": p99["ttft"], "tbt_p99_seconds": p99["tbt"], "tbt_samples": int(len(tbt)),
        "slo_attainment": within / len(runs.logs) if runs.logs else None})

"""Serving metrics of the decode workloads: each request's token times, latency percentiles,
goodput under latency objectives, and the capacity search.

The words are those of the serving papers (Vidur, Agrawal et al., MLSys 2024; Sarathi-Serve,
OSDI 2024; DistServe, Zhong et al., OSDI 2024):

- a token's time is the cycle its worker finished the step that made it (the cycle it sent
  the scheduler its reply); the tokens of one speculative-decoding step share that cycle;
- TTFT (time to first token): first token's time - arrival;
- TBT (time between tokens): every gap between consecutive tokens of a request (a step that
  yields k tokens gives one gap and k - 1 gaps of zero); a request's mean TBT is
  (last - first) / (tokens - 1), DistServe's TPOT;
- e2e (end-to-end latency): last token's time - arrival;
- percentiles: ``numpy.percentile``'s default (linear interpolation between the closest
  ranks: the q-th percentile of n sorted values is at rank (n - 1) q / 100), over the requests
  that finished served (TTFT and e2e: one value each; TBT: every gap of every such request);
- goodput (DistServe): served requests that meet both objectives, TTFT <= ``slo_ttft`` and
  mean TBT <= ``slo_tbt`` (an objective of 0 is none), per simulated second;
- capacity: the highest arrival-rate scale at which the p99 TTFT and p99 TBT meet the objectives
  and every lower scale tried meets them too (sim/workloads/capacity.py).

The records are what the scheduler and the workers log; they are a view of replies the
result hash already covers, so they stay out of it (``HASHED``) and recorded hashes of runs
without preemption do not move.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass
from fractions import Fraction
from typing import Any, ClassVar, Sequence

import numpy as np

from sim.chip.records import column

PERCENTILES = (50, 90, 99)
SERVED = "ok"


@dataclass(frozen=True, slots=True)
class RequestLog:
    """One request that ended (served or refused), as its scheduler saw it."""

    request: int
    arrival: int  # cycle it arrived
    admitted: int  # cycle it was first admitted (-1: never)
    token_cycles: Sequence[int]  # each generated token's cycle (an array of int64: 8 bytes a token)
    preemptions: int
    status: str  # "ok" (served) or "failed" (refused: it can never fit, or a buffer larger than any MU)

    HASHED: ClassVar[bool] = False

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class PreemptionLog:
    """One preemption at the preempted sequence's worker: from the order to the room being free
    (recompute: its KV freed; swap: its KV written to DRAM, then freed), or a swap-in."""

    request: int
    worker: int  # CU unit id
    what: str  # "recompute", "swap-out" or "swap-in"
    start: int  # the order came (swap-in: its loads were sent, the buffers allocated)
    moved: int  # its KV was in DRAM (swap-out) or back in its MUs (swap-in); recompute: ``start``
    end: int  # its room was free (swap-in: ``moved``)
    kv_bytes: int  # bytes of KV freed, written to DRAM, or read back

    HASHED: ClassVar[bool] = False

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class RequestRow:
    """A row of run_requests (its columns are declared here, once)."""

    request: int = column("int64", "request (sequence) id")
    arrival_seconds: float = column("double", "arrival, s after the run's start")
    admitted_seconds: float = column("double", "first admission (its prefill began), s (null: never admitted)")
    first_token_seconds: float = column("double", "time of its first token, s (null: none)")
    finished_seconds: float = column("double", "time of its last token, s (null: none)")
    tokens: int = column("int64", "tokens generated")
    preemptions: int = column("int64", "times it was preempted (memory.on_oom = \"preempt\")")
    ttft_seconds: float = column("double", "time to first token: first token - arrival, s")
    tbt_mean_seconds: float = column("double", "mean time between tokens (TPOT): (last - first) / (tokens - 1), "
                                               "s (null below 2 tokens)")
    tbt_max_seconds: float = column("double", "longest gap between two consecutive tokens, s")
    e2e_seconds: float = column("double", "end-to-end latency: last token - arrival, s")
    meets_slo: bool = column("bool", "served and within workload.decode.slo_ttft and slo_tbt (mean TBT)")
    status: str = column("string", "ok (served) or failed (refused: never fits, or larger than any MU)")


@dataclass(frozen=True)
class Objectives:
    """Latency objectives in seconds (0: none)."""

    ttft: float = 0.0
    tbt: float = 0.0

    @property
    def any(self) -> bool:
        return self.ttft > 0 or self.tbt > 0

    def met(self, ttft: float, tbt_mean: float) -> bool:
        return (self.ttft <= 0 or ttft <= self.ttft) and (self.tbt <= 0 or not tbt_mean > self.tbt)


def _none_if_nan(x: float) -> float | None:
    return None if x != x else float(x)


def _percentiles(name: str, values: np.ndarray) -> dict[str, float | None]:
    return {f"{name}_p{q}_seconds": float(np.percentile(values, q)) if len(values) else None for q in PERCENTILES}


def request_rows(logs: list[RequestLog], clock_hz: float, slo: Objectives) -> list[RequestRow]:
    """One row per request, by id."""
    rows = []
    for r in sorted(logs, key=lambda x: x.request):
        t = np.asarray(r.token_cycles, dtype=np.float64) / clock_hz
        arrival = r.arrival / clock_hz
        first = float(t[0]) if len(t) else float("nan")
        last = float(t[-1]) if len(t) else float("nan")
        mean = (last - first) / (len(t) - 1) if len(t) > 1 else float("nan")
        gaps = np.diff(t)
        ttft = first - arrival
        rows.append(RequestRow(
            r.request, arrival, r.admitted / clock_hz if r.admitted >= 0 else float("nan"), first, last, len(t),
            r.preemptions, ttft, mean, float(gaps.max()) if len(gaps) else float("nan"), last - arrival,
            r.status == SERVED and len(t) > 0 and slo.met(ttft, mean), r.status))
    return rows


def serving_figures(logs: list[RequestLog], preemptions: list[PreemptionLog], clock_hz: float, seconds: float,
                    slo: Objectives) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run summary's serving figures and the run_requests columns."""
    rows = request_rows(logs, clock_hz, slo)
    served = [r for r in rows if r.status == SERVED and r.tokens > 0]
    ttft, tbt = served_latencies(logs, clock_hz)
    e2e = np.array([r.e2e_seconds for r in served])
    good = sum(r.meets_slo for r in rows)
    summary: dict[str, Any] = {
        "requests_finished": len(served),
        "preemptions": sum(1 for p in preemptions if p.what != "swap-in"),
        "preempted_requests": sum(1 for r in rows if r.preemptions),
        **_percentiles("ttft", ttft), **_percentiles("tbt", tbt), **_percentiles("e2e", e2e),
        "slo_ttft_seconds": slo.ttft or None, "slo_tbt_seconds": slo.tbt or None,
        "goodput_requests_per_second": good / seconds if slo.any and seconds > 0 else None,
        "slo_attainment": good / len(rows) if slo.any and rows else None,
    }
    cols = {name: [getattr(r, name) for r in rows] for name in RequestRow.__dataclass_fields__}
    for name, vals in cols.items():  # NaN (no such time) is null in the table
        if vals and isinstance(vals[0], float):
            cols[name] = [_none_if_nan(v) for v in vals]
    return summary, {"requests": cols}


def served_latencies(logs: list[RequestLog], clock_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """The samples of the latency percentiles: each served request's TTFT (by request id) and
    every gap between consecutive tokens of every served request, in seconds."""
    served = [x for x in sorted(logs, key=lambda x: x.request) if x.status == SERVED and len(x.token_cycles)]
    ttft = np.array([(x.token_cycles[0] - x.arrival) / clock_hz for x in served])
    tbt = np.concatenate([np.diff(np.asarray(x.token_cycles, dtype=np.float64)) / clock_hz for x in served]) \
        if served else np.zeros(0)
    return ttft, tbt


def samples_beyond_the_maximum(q: float) -> int:
    """The fewest samples whose q-th percentile (``numpy.percentile``'s linear interpolation, at
    rank (n - 1) q / 100) does not depend on the largest one: (n - 1) q / 100 <= n - 2, so
    n >= 1 + 100 / (100 - q); 101 for a p99 (below it the p99 is interpolated towards the maximum,
    and up to 100 samples are the maximum's weight at least 0.01 (n - 1))."""
    return math.ceil(1 + Fraction(100) / (Fraction(100) - Fraction(q).limit_denominator(10**6)))


def meets_p99(summary: dict[str, Any], slo: Objectives) -> bool:
    """Whether a run served every request with its p99 TTFT and p99 TBT within the objectives."""
    if not summary.get("completed") or summary.get("requests_failed"):
        return False
    ttft, tbt = summary.get("ttft_p99_seconds"), summary.get("tbt_p99_seconds")
    return (slo.ttft <= 0 or (ttft is not None and ttft <= slo.ttft)) and \
        (slo.tbt <= 0 or tbt is None or tbt <= slo.tbt)

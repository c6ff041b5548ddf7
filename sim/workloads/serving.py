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
- capacity (Vidur's capacity search): the highest arrival rate whose p99 TTFT and p99 TBT meet
  the objectives, found by bisection over the rate (``capacity``).

The records are what the scheduler and the workers log; they are a view of replies the
result hash already covers, so they stay out of it (``HASHED``) and recorded hashes of runs
without preemption do not move.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from typing import Any, Callable, ClassVar, Sequence

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
    served = [(r, x) for r, x in zip(rows, sorted(logs, key=lambda x: x.request))
              if r.status == SERVED and r.tokens > 0]
    ttft = np.array([r.ttft_seconds for r, _ in served])
    e2e = np.array([r.e2e_seconds for r, _ in served])
    tbt = np.concatenate([np.diff(np.asarray(x.token_cycles, dtype=np.float64)) / clock_hz for _, x in served]) \
        if served else np.zeros(0)
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


def meets_p99(summary: dict[str, Any], slo: Objectives) -> bool:
    """Whether a run served every request with its p99 TTFT and p99 TBT within the objectives."""
    if not summary.get("completed") or summary.get("requests_failed"):
        return False
    ttft, tbt = summary.get("ttft_p99_seconds"), summary.get("tbt_p99_seconds")
    return (slo.ttft <= 0 or (ttft is not None and ttft <= slo.ttft)) and \
        (slo.tbt <= 0 or tbt is None or tbt <= slo.tbt)


@dataclass
class Capacity:
    """The result of a capacity search: the highest rate found to meet the objectives (0: not even
    the lowest) and every rate tried, in order, with whether it met them."""

    rate: float
    tried: list[tuple[float, bool]] = field(default_factory=list)
    bounded: bool = True  # False: the highest rate tried still met them (the capacity is at least ``rate``)


def capacity(meets: Callable[[float], bool], lo: float, hi: float, rel_tol: float = 0.05,
             max_runs: int = 16) -> Capacity:
    """Vidur's capacity search: bisect the arrival rate (a speed-up of the trace) between ``lo`` and
    ``hi`` for the highest one that ``meets`` (a run's p99 TTFT and TBT within the objectives),
    assuming a rate that meets them is met by every lower one. Stops when hi / lo - 1 <= rel_tol."""
    if not 0 < lo < hi:
        raise ValueError(f"capacity search needs 0 < lo < hi, got lo={lo}, hi={hi}")
    out = Capacity(0.0)

    def test(rate: float) -> bool:
        ok = bool(meets(rate))
        out.tried.append((rate, ok))
        return ok

    if not test(lo):
        return out
    if test(hi):
        out.rate, out.bounded = hi, False
        return out
    while hi / lo - 1 > rel_tol and len(out.tried) < max_runs:
        mid = (lo * hi) ** 0.5  # rates span orders of magnitude: bisect in log space
        if test(mid):
            lo = mid
        else:
            hi = mid
    out.rate = lo
    return out

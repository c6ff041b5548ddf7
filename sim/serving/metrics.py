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
  and every lower scale tried meets them too (sim/serving/capacity.py).

The records are what the scheduler and the workers log; they are a view of replies the
result hash already covers, so they stay out of it (``HASHED``) and recorded hashes of runs
without preemption do not move.
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass
from fractions import Fraction
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
    prompt: int = 0  # its prompt's tokens
    prefill_cycles: int = -1  # cycles of the steps that prefilled it before its first token (-1: not kept)

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
    prompt_tokens: int = column("int64", "tokens of its prompt")
    tokens: int = column("int64", "tokens generated")
    preemptions: int = column("int64", "times it was preempted (memory.on_oom = \"preempt\")")
    ttft_seconds: float = column("double", "time to first token: first token - arrival, s")
    queueing_seconds: float = column("double", "serve: its TTFT's wait before its first admission: admitted - "
                                     "arrival, s (null: no first token)")
    prefill_seconds: float = column("double", "serve: its TTFT's prefill: the steps that prefilled it before its "
                                    "first token, s (null: no first token, or not a serve run)")
    interference_seconds: float = column("double", "serve: the rest of its TTFT, from its first admission to its "
                                         "first token outside its prefill steps (others' steps, a preemption's wait), "
                                         "s; queueing + prefill + interference = ttft")
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

    def met(self, ttft: np.ndarray, tbt_mean: np.ndarray) -> np.ndarray:
        """Whether each request's TTFT and mean TBT meet the objectives (a NaN mean TBT, below 2 tokens, meets any)."""
        ok_ttft = ttft <= self.ttft if self.ttft > 0 else np.ones(np.shape(ttft), dtype=bool)
        return ok_ttft & np.logical_not(tbt_mean > self.tbt) if self.tbt > 0 else ok_ttft


def _percentiles(name: str, values: np.ndarray) -> dict[str, float | None]:
    return {f"{name}_p{q}_seconds": float(np.percentile(values, q)) if len(values) else None for q in PERCENTILES}


def _int_column(logs: list[RequestLog], value: Callable[[RequestLog], int]) -> np.ndarray:
    return np.fromiter((value(x) for x in logs), dtype=np.int64, count=len(logs))


def _nulls_where_nan(x: np.ndarray) -> np.ndarray:
    """``x`` with its NaN (no such time) masked: null in the table (cluster/results/schemas.py)."""
    return np.ma.MaskedArray(x, mask=np.isnan(x))


def request_columns(logs: list[RequestLog], clock_hz: float, slo: Objectives) -> dict[str, Any]:
    """run_requests' columns (``RequestRow``'s), one array each, by request id: a few numbers per
    request, whatever its tokens (a run's memory is its live state plus a row per request).
    Each value is the float arithmetic of its definition on the token times in seconds."""
    logs = sorted(logs, key=lambda x: x.request)
    n = len(logs)
    tokens = _int_column(logs, lambda x: len(x.token_cycles))
    has = tokens > 0
    arrival = _int_column(logs, lambda x: x.arrival) / clock_hz
    admitted_at = _int_column(logs, lambda x: x.admitted)
    admitted = np.where(admitted_at >= 0, admitted_at / clock_hz, np.nan)
    first = np.where(has, _int_column(logs, lambda x: x.token_cycles[0] if len(x.token_cycles) else 0) / clock_hz,
                     np.nan)
    last = np.where(has, _int_column(logs, lambda x: x.token_cycles[-1] if len(x.token_cycles) else 0) / clock_hz,
                    np.nan)
    two = tokens > 1
    mean = np.full(n, np.nan)
    mean[two] = (last[two] - first[two]) / (tokens[two] - 1)
    gap_max = np.full(n, np.nan)
    for i in np.flatnonzero(two).tolist():  # the longest gap between the times in seconds
        gap_max[i] = np.diff(np.asarray(logs[i].token_cycles, dtype=np.float64) / clock_hz).max()
    ttft = first - arrival
    queueing, prefill, interference = ttft_parts(logs, clock_hz)
    status = [x.status for x in logs]
    served = np.array([s == SERVED for s in status], dtype=bool) & has
    meets = served & slo.met(ttft, mean)
    return {"request": _int_column(logs, lambda x: x.request), "arrival_seconds": arrival,
            "admitted_seconds": _nulls_where_nan(admitted), "first_token_seconds": _nulls_where_nan(first),
            "finished_seconds": _nulls_where_nan(last), "tokens": tokens,
            "prompt_tokens": _int_column(logs, lambda x: x.prompt),
            "preemptions": _int_column(logs, lambda x: x.preemptions), "ttft_seconds": _nulls_where_nan(ttft),
            "queueing_seconds": _nulls_where_nan(queueing), "prefill_seconds": _nulls_where_nan(prefill),
            "interference_seconds": _nulls_where_nan(interference),
            "tbt_mean_seconds": _nulls_where_nan(mean), "tbt_max_seconds": _nulls_where_nan(gap_max),
            "e2e_seconds": _nulls_where_nan(last - arrival), "meets_slo": meets, "status": status}


def prompt_figures(logs: list[RequestLog]) -> dict[str, int]:
    """The prompt tokens of the requests that ended, served or refused (the trace's or the drawn lengths)."""
    return {"prompt_tokens": sum(x.prompt for x in logs)}


def ttft_parts(logs: list[RequestLog], clock_hz: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each request's TTFT in three (``logs`` sorted by request; NaN where it has no first token, and
    prefill and interference where its prefill steps were not kept): queueing, from arrival to its
    first admission; prefill, the steps that prefilled it; interference, the rest up to its first
    token. Whole cycles, each part's seconds its cycles over the clock, so the parts' cycles add
    up to the TTFT's exactly."""
    n = len(logs)
    queueing, prefill, interference = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    for i, x in enumerate(logs):
        if not len(x.token_cycles) or x.admitted < 0:
            continue
        queueing[i] = (x.admitted - x.arrival) / clock_hz
        if x.prefill_cycles >= 0:
            prefill[i] = x.prefill_cycles / clock_hz
            interference[i] = (x.token_cycles[0] - x.admitted - x.prefill_cycles) / clock_hz
    return queueing, prefill, interference


def serving_figures(logs: list[RequestLog], preemptions: list[PreemptionLog], clock_hz: float, seconds: float,
                    slo: Objectives) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run summary's serving figures and the run_requests columns."""
    cols = request_columns(logs, clock_hz, slo)
    served = (np.array([s == SERVED for s in cols["status"]], dtype=bool) & (cols["tokens"] > 0))
    ttft, tbt = served_latencies(logs, clock_hz)
    good = int(np.count_nonzero(cols["meets_slo"]))
    n = len(cols["status"])
    summary: dict[str, Any] = {
        "requests_finished": int(np.count_nonzero(served)),
        "preemptions": sum(1 for p in preemptions if p.what != "swap-in"),
        "preempted_requests": int(np.count_nonzero(cols["preemptions"])),
        **_percentiles("ttft", ttft), **_percentiles("tbt", tbt),
        **_percentiles("e2e", np.ma.getdata(cols["e2e_seconds"])[served]),
        "slo_ttft_seconds": slo.ttft or None, "slo_tbt_seconds": slo.tbt or None,
        "goodput_requests_per_second": good / seconds if slo.any and seconds > 0 else None,
        "slo_attainment": good / n if slo.any and n else None,
    }
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

"""Where memory runs out at real scale: Llama-3.1-8B served on one sn40l socket whose HBM is cut to 17 GB
(cluster/evaluate/bases/serve_llama8b_sn40l_hbm17.toml), so the running sequences' KV outgrows it on a
window of the Azure 2023 code trace and ``memory.on_oom`` decides what is served.

The room is a closed form: the HBM's pages less the weights' leave ``room_tokens`` of KV. A request whose
prompt and output need more than that cannot run even alone, and memory-aware admission (on_oom =
"preempt") refuses exactly those; it serves every other request of the window. The study's points share a
step cache (``DIR/anchors``): the anchors are priced once, whatever on_oom the point runs."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cluster.config.units import parse_time
from cluster.evaluate.studies.common import bars, ids, pick
from cluster.evaluate.study import Check, Row, Study, col

ROOT = Path(__file__).resolve().parents[3]
# The trace every point serves: the public Azure 2023 code trace's hour. The conversation hour beside it
# (AzureLLMInferenceTrace_conv.csv: shorter prompts, longer outputs, twice the rate) is the switch; the
# window, the HBM and the tests' worked counts are the code trace's.
TRACE = ROOT / "tests/data/traces/azure2023-hour/AzureLLMInferenceTrace_code.csv"
HBM_BYTES = 17_000_000_000  # as the base config sets chip.hbm.capacity
PAGE_BYTES = 2 * 2**20  # sn40l's HBM page (mapping/chips.py)
WEIGHT_BYTES = 16_060_522_496  # Llama-3.1-8B (mapping/models.py: the published config's parameters, bf16)
KV_TOKEN_BYTES = 131_072  # 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 B
WINDOW = {True: 10, False: 60}  # seconds of the trace from its first arrival: --quick, full
CASES = {True: (("stall", ""), ("fail", ""), ("preempt", "recompute")),
         False: (("stall", ""), ("fail", ""), ("evict", ""), ("preempt", "recompute"), ("preempt", "swap"))}


@dataclass(frozen=True)
class Request:
    """One request of the trace: its prompt and the tokens it makes."""

    prompt: int
    output: int


def window(seconds: float, trace: Path = TRACE) -> list[Request]:
    """The trace's requests arriving within ``seconds`` of its first arrival (as the run's window)."""
    with open(trace, newline="") as f:
        rows = list(csv.DictReader(f))
    stamps = [datetime.fromisoformat(r["TIMESTAMP"][:26]) for r in rows]
    return [Request(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for r, t in zip(rows, stamps)
            if (t - stamps[0]).total_seconds() < seconds]


def room_tokens(hbm: int = HBM_BYTES) -> int:
    """Tokens of KV the HBM holds besides the weights, in whole pages."""
    pages = hbm // PAGE_BYTES - math.ceil(WEIGHT_BYTES / PAGE_BYTES)
    return pages * PAGE_BYTES // KV_TOKEN_BYTES


def never_fit(reqs: list[Request], hbm: int = HBM_BYTES) -> int:
    """Requests whose KV (prompt and every token but the last, in pages) exceeds the room even alone."""
    room = room_tokens(hbm)
    return sum(1 for q in reqs if q.prompt + q.output - 1 > room)


def _points(quick: bool) -> list[dict]:
    base = {"workload.decode.trace": str(TRACE), "workload.decode.trace_duration": f"{WINDOW[quick]}s",
            "chip.hbm.capacity": HBM_BYTES}  # the anchors: DIR/anchors, the sweep's step cache (spec.py)
    return [{**base, "memory.on_oom": o, **({"memory.preempt_mode": m} if m else {})} for o, m in CASES[quick]]


def _key(r: Row) -> tuple[str, str]:
    mode = r.get("preempt_mode") if r.get("on_oom") == "preempt" else ""
    return str(r.get("on_oom")), str(mode or "")


def _case(r: Row) -> str:
    o, m = _key(r)
    return f"{o}-{m}" if m else o


def _served(r: Row) -> int:
    return int(r.get("requests_finished") or 0)


def _judge(rows: list[Row]) -> list[Check]:
    if not rows:
        return []
    reqs = window(parse_time(rows[0]["workload_decode_trace_duration"]))  # the window the points swept
    n, lost = len(reqs), never_fit(reqs)
    fit = n - lost
    out = []
    for r in rows:
        ended = _served(r) + int(r.get("requests_failed") or 0)
        if r.get("status") != "deadlocked":
            out.append(Check(f"{_case(r)}: every request of the window ends, served or refused",
                             f"{_served(r)} served + {r.get('requests_failed') or 0} refused = {ended} of {n}",
                             f"{n} (the trace's window, counted from the file)", ended == n, ids(r)))
    pre = pick(rows, on_oom="preempt")
    if pre:
        out.append(Check("preempt refuses exactly the requests that cannot fit alone and serves the rest",
                         f"{_served(pre)} served, {pre.get('requests_failed')} refused",
                         f"{fit} served, {lost} refused (closed form: prompt + output - 1 > {room_tokens():,} tokens, "
                         f"the HBM's pages less the weights'; vLLM's memory-aware admission, SOSP 2023)",
                         _served(pre) == fit and pre.get("requests_failed") == lost, ids(pre)))
    stall = pick(rows, on_oom="stall")
    if stall and pre:
        out.append(Check("stall deadlocks where preemption serves (the toy's known result, docs/run.md Memory "
                         "pressure: virtual/stall deadlocked, preempt served all)",
                         f"stall {stall['status']} with {_served(stall)} served; preempt {_served(pre)}",
                         "stall deadlocked and serves fewer", stall["status"] == "deadlocked"
                         and _served(stall) < _served(pre), ids(stall, pre)))
    fail = pick(rows, on_oom="fail")
    if fail and pre:
        out.append(Check("fail refuses requests that would fit alone (a sequence that cannot grow fails)",
                         f"{fail.get('requests_failed')} refused, {_served(fail)} served",
                         f"more than the {lost} that cannot fit; fewer served than preempt's {_served(pre)}",
                         int(fail.get("requests_failed") or 0) > lost and _served(fail) < _served(pre), ids(fail, pre)))
    served = {_case(r): _served(r) for r in rows}
    out.append(Check("on_oom changes what is served (at 64 GB every on_oom serves every request)",
                     ", ".join(f"{k} {v}" for k, v in served.items()), "more than one figure",
                     len(set(served.values())) > 1, ids(*rows)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("requests served", "requests_finished"),
                              ("requests refused", "requests_failed"),
                              ("HBM peak (GB)", lambda r: (r.get("hbm_peak_bytes") or 0) / 1e9),
                              ("TTFT p99 (s)", "ttft_p99_seconds")),
                plt, f"Llama-3.1-8B on one sn40l, HBM cut to {HBM_BYTES / 1e9:g} GB: what on_oom serves")


STUDY = Study(
    name="memory-pressure", title="Where memory runs out: on_oom when the KV outgrows the HBM",
    question="When the running sequences' KV is more than the memory holds, what does each on_oom serve?",
    scale=f"real: Llama-3.1-8B on one sn40l socket with its HBM cut to {HBM_BYTES / 1e9:g} GB ({room_tokens():,} "
          f"tokens of KV besides the weights), the Azure 2023 code trace's first {WINDOW[True]} s (--quick; "
          f"{WINDOW[False]} s full) at its recorded times; not run: Llama-3.1-70B on 8 sockets (minutes of anchors "
          "a window) and the MUs' own pressure (buffers-per-mu runs the KV on chip until it does not fit)",
    base="serve_llama8b_sn40l_hbm17.toml", points=_points, case=_case,
    columns=(col("status", "status", "{}"), col("served", "requests_finished", "{}"),
             col("refused", "requests_failed", "{}"), col("preemptions", "preemptions", "{}"),
             col("TTFT p50 s", "ttft_p50_seconds", "{:.3g}"), col("TTFT p99 s", "ttft_p99_seconds", "{:.3g}"),
             col("tokens/s", "tokens_per_second", "{:,.1f}"), col("HBM peak B", "hbm_peak_bytes", "{:,}"),
             col("DDR written B", "ddr_write_bytes", "{:,}"), col("anchors", "anchors", "{}")),
    judge=_judge, draw=_draw,
    notes=(f"Room: {HBM_BYTES:,} B of HBM in {PAGE_BYTES // 2**20} MiB pages less the weights' "
           f"{math.ceil(WEIGHT_BYTES / PAGE_BYTES):,} pages leaves {room_tokens():,} tokens of KV at "
           f"{KV_TOKEN_BYTES // 1024} KiB a token.",
           "Why evict and both preempt modes give the same figures: at every step of the window the running "
           "sequences' KV at their last tokens fits the room together (the code trace's outputs, 6 to 142 "
           "tokens, grow a request by at most 8 pages; the head that waits is a long prompt), so no running "
           "sequence is ever refused room and none is preempted, whatever the mode. on_oom acts only on a head "
           "that has no room: preempt keeps it waiting; evict, admitting without the books, admits it, is "
           "refused its prompt's pages and gives it back before any step (no KV of its own: no preemption), "
           "which runs the same steps. tests/cluster/evaluate/test_pressure.py replays the minute at roofline "
           "prices: 842 steps under each, 0 preemptions."))

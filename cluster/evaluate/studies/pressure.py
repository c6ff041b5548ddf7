"""Where memory runs out: the policies and on_oom on a trace whose KV is more than the MUs hold.

Toy scale (plasticine, 2 layers x 2 heads): at real scale on sn40l today every policy and on_oom
serves the serving example's requests (its KV lives in HBM), so the policies differ there only in
speed; this is where they differ in what they serve. The known answers are docs/run.md's table
("Memory pressure: what the policies serve"), measured on this configuration."""

from __future__ import annotations

from cluster.evaluate.studies.common import bars, ids, num, pick, served
from cluster.evaluate.study import Check, Row, Study, col

# (policy, on_oom, preempt_mode) -> (status, served of 64), docs/run.md "Memory pressure"
KNOWN = {
    ("virtual", "stall", ""): ("deadlocked", 7),
    ("virtual", "preempt", "recompute"): ("completed", 64),
    ("static-single", "stall", ""): ("completed", 64),
    ("realloc-copy", "stall", ""): ("deadlocked", 0),
    ("virtual", "preempt", "swap"): ("completed", 64),
    ("static-multi", "stall", ""): ("completed", 64),
}
QUICK = 4  # the first four cases


def _points(quick: bool) -> list[dict]:
    cases = list(KNOWN)[:QUICK] if quick else list(KNOWN)
    return [{"memory.policy": p, "memory.on_oom": o, "memory.preempt_mode": m} for p, o, m in cases]


def _key(r: Row) -> tuple[str, str, str]:
    mode = r.get("preempt_mode") if r.get("on_oom") == "preempt" else ""
    return (str(r.get("policy")), str(r.get("on_oom")), str(mode or ""))


def _case(r: Row) -> str:
    p, o, m = _key(r)
    return f"{p}/{o}{'-' + m if m else ''}"


def _judge(rows: list[Row]) -> list[Check]:
    out = []
    for r in rows:
        want = KNOWN.get(_key(r))
        if want is None:
            continue
        got = (r.get("status"), int(r.get("requests_finished") or 0))
        out.append(Check(f"{_case(r)}: how the run ends and what it serves", f"{got[0]}, {got[1]}/64 served",
                         f"{want[0]}, {want[1]}/64 (docs/run.md, Memory pressure)", got == want, ids(r)))
    v, pre = pick(rows, policy="virtual", on_oom="stall"), pick(rows, policy="virtual", on_oom="preempt")
    if v and pre:
        out.append(Check("preemption turns virtual's deadlock into a completed run",
                         f"{served(v)} -> {served(pre)} served, {num(pre.get('tokens_per_second'))} tokens/s",
                         "all 64 served under preempt (vLLM's recompute preemption, SOSP 2023, section 4.5)",
                         pre.get("status") == "completed" and v.get("status") != "completed", ids(v, pre)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("requests served (of 64)", "requests_finished"),
                              ("peak MU utilisation", "peak_mu_utilization"),
                              ("tokens / s", "tokens_per_second")),
                plt, "Memory pressure: kv_decode_pressure.toml (toy, plasticine)")


STUDY = Study(
    name="memory-pressure", title="Where memory runs out: policies and on_oom under a KV larger than the MUs",
    question="When the running sequences' KV is more than the MUs hold, which policy and on_oom serve the trace?",
    scale="toy (plasticine, 2 layers x 2 heads): at real scale the example's KV is in HBM and every policy serves "
          "all requests, so the policies differ only there in speed",
    base="kv_decode_pressure.toml", points=_points, case=_case,
    columns=(col("status", "status", "{}"), col("served", "requests_finished", "{}"),
             col("peak MU util.", "peak_mu_utilization", "{:.3f}"), col("TTFT p99 s", "ttft_p99_seconds", "{:.3g}"),
             col("tokens/s", "tokens_per_second", "{:,.0f}"), col("preemptions", "preemptions", "{}")),
    judge=_judge, draw=_draw)

"""Design-space exploration with the optimiser (rdasim explore, multi-objective TPE) at real scale: one
Llama-3.1-8B layer's decode step on sn40l with its KV in MUs, over MU size, policy, block size, buffers per
MU, reclamation and weight bits, for throughput against peak on-chip memory and energy a token
(cluster/evaluate/bases/explore_kv_mu_sn40l.toml). Its trials are a sweep's points like every other study's.

The reference is brute force over the stored trials: every front member is dominated by no feasible
trial, and every feasible trial off the front is weakly dominated by a member of it."""

from __future__ import annotations

import time
from pathlib import Path

from cluster.evaluate.run import StudyRun, _cpu
from cluster.evaluate.spec import base_path, sweep_name
from cluster.evaluate.studies.common import bars
from cluster.evaluate.study import Check, Column, Row, Study, col

BUDGET = {True: 6, False: 40}  # trials: --quick, full (about 15 CPU s a trial)
MUS = 1040  # sn40l's MUs: the grid's, not explored
OBJECTIVES = (("tokens_per_second", 1), ("peak_mu_reserved", -1), ("energy_per_token_joules", -1))  # +1: maximise


def _dominates(a: Row, b: Row) -> bool:
    ge = all(s * a[m] >= s * b[m] for m, s in OBJECTIVES)
    return ge and any(s * a[m] > s * b[m] for m, s in OBJECTIVES)


def _dominates_in_bytes(a: Row, b: Row) -> bool:
    """``_dominates`` with the peak reserved MU bytes in place of their share of the chip."""
    pairs = [(s * a[m], s * b[m]) for m, s in OBJECTIVES if m != "peak_mu_reserved"]
    pairs.append((-_reserved_bytes(a), -_reserved_bytes(b)))
    return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)


def _feasible(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.get("feasible") and r.get("status") == "completed"
            and all(r.get(m) is not None for m, _ in OBJECTIVES)]


def _run(study: Study, out: Path, quick: bool, address: str | None, in_process: bool, quiet: bool) -> StudyRun:
    """Explore into DIR/<sweep>/ (resumes: stored trials count toward the budget) and read its trials back."""
    import pyarrow.dataset as ds

    from cluster.explore.driver import Options, run_explore
    from cluster.explore.spec import read_explore

    spec_path = base_path(study.base)
    spec = read_explore(spec_path)
    name = sweep_name(study, quick)
    cpu, start = _cpu(), time.perf_counter()
    summary = run_explore(spec, out / name, Options(budget=BUDGET[quick], address=address,
                                                     in_process=in_process, quiet=quiet))
    here = _cpu() - cpu
    table_dir = next((out / name).glob("*/run_summary"))
    rows = ds.dataset(table_dir, format="parquet", partitioning="hive").to_table().to_pylist()
    rows.sort(key=lambda r: (r.get("trial") or 0, r.get("rung") or 0))
    front = {(p.trial, p.rung) for p in summary.front.pareto}  # a stored row is one trial's run at one rung
    for r in rows:
        r["on_front"] = (r.get("trial"), r.get("rung")) in front
    seconds = [float(r.get("point_seconds") or 0.0) for r in rows]
    if not quiet:
        print(f"evaluate: {name}: {len(rows)} trials, {sum(seconds):.1f} point-seconds, {here:.1f} CPU s here "
              f"({time.perf_counter() - start:.1f} s wall here)", flush=True)
    from cluster.sweep.outcomes import Outcomes, row_outcome

    ended: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        ended.setdefault(row_outcome(r), []).append(i)
    outcomes = Outcomes({k: len(v) for k, v in ended.items()}, ended)
    return StudyRun(study, name, spec_path, rows, outcomes, summary.computed, summary.stored,
                    sum(seconds), seconds, here)


def _reserved_bytes(r: Row) -> float:
    """Peak reserved MU bytes: the run's share times the chip's MU bytes (the MU size is a knob)."""
    return float(r["peak_mu_reserved"]) * MUS * int(r.get("chip_mu_bytes") or 524288)


def _when(header: str, name: str, key: str, value: str) -> Column:
    """A column of a knob the optimiser asks only under ``key = value`` ("-" elsewhere: the base's value is moot)."""
    return Column(header, lambda r: r.get(name) if r.get(key) == value else None, "{}")


def _case(r: Row) -> str:
    return f"trial {r.get('trial')}{' (front)' if r.get('on_front') else ''}"


def _judge(rows: list[Row]) -> list[Check]:
    ok = _feasible(rows)
    front = [r for r in ok if r["on_front"]]
    if not front:
        return [Check("the optimiser finds a feasible design", f"{len(ok)} feasible of {len(rows)} trials",
                      "at least one", False, ())]
    dominated = [f for f in front if any(_dominates(r, f) for r in ok)]
    uncovered = [r for r in ok if not r["on_front"] and not any(
        all(s * f[m] >= s * r[m] for m, s in OBJECTIVES) for f in front)]
    by_bytes = [f for f in front if any(_dominates_in_bytes(r, f) for r in ok)]
    return [Check("the front is the non-dominated set of the feasible trials",
                  f"{len(front)} on the front of {len(ok)} feasible; {len(dominated)} dominated, "
                  f"{len(uncovered)} off-front trials not covered",
                  "0 and 0 (brute force over every pair of stored trials)", not dominated and not uncovered,
                  tuple(r["run_id"] for r in front)),
            Check("and stays so with reserved bytes in place of the share (the MU size is a knob)",
                  f"{len(by_bytes)} of {len(front)} front members dominated in bytes", "0 (brute force)",
                  not by_bytes, tuple(r["run_id"] for r in front))]


def _draw(rows: list[Row], plt):
    ok = _feasible(rows)
    if not ok:
        return bars(rows, _case, (("tokens / s", "tokens_per_second"),), plt, "DSE: no feasible trial")
    fig, ax = plt.subplots(figsize=(5.4, 3.6), layout="constrained")
    energy = [r["energy_per_token_joules"] * 1e3 for r in ok]
    lo, hi = min(energy), max(energy)
    for on, marker, size, label in ((False, "o", 40, "feasible trial"), (True, "*", 160, "Pareto front")):
        pts = [r for r in ok if r["on_front"] == on]
        sc = ax.scatter([_reserved_bytes(r) / 1e6 for r in pts], [r["tokens_per_second"] for r in pts], marker=marker,
                        s=size, c=[r["energy_per_token_joules"] * 1e3 for r in pts], cmap="viridis", vmin=lo,
                        vmax=hi, edgecolors="k", linewidths=0.6, label=label)
    fig.colorbar(sc, ax=ax).set_label("energy / token through the layer (mJ)", fontsize=8)
    lost = [r for r in rows if r not in ok and r.get("peak_mu_reserved") is not None and r.get("tokens_per_second")]
    ax.scatter([_reserved_bytes(r) / 1e6 for r in lost], [r["tokens_per_second"] for r in lost], marker="x", s=50,
               color="grey", label="infeasible (deadlocked): its pace until it stopped")
    ax.set_xlabel("peak MU bytes reserved (MB)", fontsize=8)
    ax.set_ylabel("tokens / s", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.suptitle("Design-space exploration (TPE): Llama-3.1-8B layer, KV in MUs, sn40l", fontsize=9)
    return fig


STUDY = Study(
    name="dse", title="Design-space exploration with the optimiser",
    question="Over MU size, policy, block size, buffers per MU, reclamation and weight bits, which designs "
             "trade throughput against peak on-chip memory and energy a token best?",
    scale=f"real: one Llama-3.1-8B layer's decode step on the whole sn40l (kv = \"mu\", 8 sequences of 1,024 "
          f"tokens, 2 passes), {BUDGET[True]} trials (--quick; {BUDGET[False]} full) of TPE over "
          "explore_kv_mu_sn40l.toml's space; the MU count stays the grid's 1,040",
    base="explore_kv_mu_sn40l.toml", points=lambda quick: [], case=_case,
    columns=(col("MU bytes", "chip_mu_bytes", "{}"), col("policy", "memory_policy", "{}"),
             _when("block", "memory_block_bytes", "memory_policy", "virtual"),
             _when("per MU", "memory_buffers_per_mu", "memory_policy", "static-multi"),
             col("reclaim", "memory_reclaim", "{}"), _when("weight bits", "memory_weight_bits", "memory_reclaim",
                                                           "partial-free"),
             col("status", "status", "{}"), col("tokens/s", "tokens_per_second", "{:,.0f}"),
             col("peak reserved", "peak_mu_reserved", "{:.4f}"),
             Column("peak reserved MB", lambda r: _reserved_bytes(r) / 1e6 if r.get("peak_mu_reserved") is not None
                    else None, "{:,.1f}"),
             col("energy/token J", "energy_per_token_joules", "{:.3g}")),
    judge=_judge, draw=_draw, runner=_run,
    notes=("The optimiser ranks designs on peak_mu_reserved, a share of the chip's MU bytes (the result table "
           "has no column of reserved bytes): with 1 MiB MUs a share is of twice the bytes of 512 KiB ones, so "
           "the figure and the MB column give the bytes (share x 1,040 x MU bytes).",))

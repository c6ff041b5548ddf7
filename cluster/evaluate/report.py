"""DIR/evaluation.md (one section a study: its table, its checks against references, its figure, every
number with the run id that produced it) and DIR/evaluation.json (the same figures for scripts)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cluster.evaluate.run import StudyRun
from cluster.evaluate.schedule import makespan
from cluster.evaluate.study import Check
from cluster.results.io import atomic_path

CLUSTER = (16, 2)  # nodes x cores a node: the cluster the wall time is projected for


@dataclass(frozen=True)
class Done:
    """A study's run, its checks and its figure."""

    run: StudyRun
    checks: list[Check]
    figure: Path | None

    @property
    def projected_seconds(self) -> float:
        return makespan(self.run.dispatch_seconds, CLUSTER[0] * CLUSTER[1])


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(d: Done) -> list[str]:
    cols = d.run.study.columns
    lines = ["| case | " + " | ".join(c.header for c in cols) + " | run id |",
             "|---|" + "---|" * len(cols) + "---|"]
    for r in d.run.rows:
        lines.append(f"| {_cell(d.run.study.case(r))} | " + " | ".join(_cell(c.render(r)) for c in cols)
                     + f" | `{r.get('run_id')}` |")
    return lines


def _checks(d: Done) -> list[str]:
    lines = ["| claim | rdasim | reference | verdict | runs |", "|---|---|---|---|---|"]
    for c in d.checks:
        lines.append(f"| {_cell(c.what)} | {_cell(c.figure)} | {_cell(c.reference)} | "
                     f"{'holds' if c.holds else '**does not hold**'} | "
                     + ", ".join(f"`{i.split('-')[0]}`" for i in c.run_ids) + " |")
    return lines


def section(d: Done, out: Path) -> list[str]:
    s, run = d.run.study, d.run
    spec = run.spec_path.relative_to(out) if run.spec_path.is_relative_to(out) else run.spec_path.name
    sim, reused = run.anchors
    lines = [f"## {s.title}", "", f"**Question.** {s.question}", "", f"**Scale.** {s.scale}.", "",
             f"Sweep `{run.sweep}` (spec `{spec}`, rows in "
             f"`{run.sweep}/run_summary/`): {len(run.rows)} points, {run.outcomes.line()}; "
             f"{run.point_seconds:.1f} point-seconds, {run.computed} simulated now and "
             f"{run.reused} reused from an earlier run; anchors {sim} simulated, {reused} reused.", ""]
    lines += _table(d) + [""]
    if d.checks:
        lines += _checks(d) + [""]
    if d.figure is not None:
        lines += [f"![{s.title}]({d.figure.relative_to(out).as_posix()})", ""]
    lines += [f"- {n}" for n in s.notes]
    return lines


def summary_rows(done: list[Done]) -> list[dict]:
    """Per study: what it cost and how its checks came out (what benchmarks/evaluation.py prints)."""
    return [{"study": d.run.study.name, "sweep": d.run.sweep, "points": len(d.run.rows),
             "computed": d.run.computed, "reused_points": d.run.reused, "point_seconds": round(d.run.point_seconds, 2),
             "here_cpu_seconds": round(d.run.here_cpu_seconds, 2), "anchors_simulated": d.run.anchors[0],
             "anchors_reused": d.run.anchors[1], "checks": len(d.checks),
             "checks_held": sum(c.holds for c in d.checks),
             "projected_wall_seconds_16x2": round(d.projected_seconds, 2),
             "scale": d.run.study.scale.split(" ")[0].rstrip(":;,")}
            for d in done]


def write(done: list[Done], out: Path, command: str, wall_seconds: float) -> Path:
    """Write DIR/evaluation.md and DIR/evaluation.json; return the Markdown's path."""
    from cluster.version import code_version

    v = code_version()
    rows = summary_rows(done)
    cpu = sum(r["point_seconds"] for r in rows)
    here = sum(r["here_cpu_seconds"] for r in rows)
    projected = sum(r["projected_wall_seconds_16x2"] for r in rows)
    held = sum(r["checks_held"] for r in rows)
    checks = sum(r["checks"] for r in rows)
    load = os.getloadavg()
    commit = f" (commit {v.commit[:12]}{', uncommitted changes' if v.dirty else ''})" if v.commit else ""
    head = ["# rdasim evaluation", "",
            f"Produced by `{command}` with rdasim {v.version}{commit} on "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {wall_seconds:.0f} s of wall time here "
            f"({os.cpu_count()} cores, load average {load[0]:.1f} at the end), {cpu:.0f} point-seconds (each "
            "point's time on its core: its CPU time when the cores are not shared; this process's own CPU time, "
            f"all of it when run in-process: {here:.0f} s). {held} of {checks} checks hold. Projected wall on "
            f"{CLUSTER[0]} nodes x {CLUSTER[1]} cores, each study's points dispatched as its sweep does and the "
            f"studies one after another: {projected:.0f} s.",
            "", "Every table row names the run (`run_id`) whose run_summary row holds its figures; each study's "
            "spec is in `specs/`, its Parquet dataset in a directory named after its sweep.", "",
            "| study | scale | points | point-seconds | anchors simulated / reused | checks held | "
            "projected wall 16x2 (s) |", "|---|---|---|---|---|---|---|"]
    head += [f"| {r['study']} | {r['scale']} | {r['points']} | {r['point_seconds']:.1f} | "
             f"{r['anchors_simulated']} / {r['anchors_reused']} | {r['checks_held']}/{r['checks']} | "
             f"{r['projected_wall_seconds_16x2']:.1f} |" for r in rows]
    body = [line for d in done for line in ["", *section(d, out)]]
    target = out / "evaluation.md"
    with atomic_path(target) as tmp:
        Path(tmp).write_text("\n".join(head + body) + "\n")
    data = {"command": command, "wall_seconds": round(wall_seconds, 2), "point_seconds": round(cpu, 2),
            "here_cpu_seconds": round(here, 2),
            "projected_wall_seconds_16x2": round(projected, 2), "load_average": round(load[0], 2),
            "studies": rows, "checks": {d.run.study.name: [{"what": c.what, "figure": c.figure,
                                                             "reference": c.reference, "holds": c.holds,
                                                             "run_ids": list(c.run_ids)} for c in d.checks]
                                        for d in done}}
    with atomic_path(out / "evaluation.json") as tmp:
        Path(tmp).write_text(json.dumps(data, indent=1) + "\n")
    return target

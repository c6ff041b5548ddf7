"""How an exploration's trials ended, counted: what "1 feasible of 12" leaves unsaid about the other 11.

Each trial is judged by its last run (its full run if it has one): feasible; stopped at a lower
fidelity by successive halving (a cut run not promoted, or with no number to rank it by yet);
rejected before running by a known constraint, or its config invalid; and otherwise by how its
run ended: infeasible by a constraint on its metrics (each named), deadlocked, cut off at
run.max_cycles, failed (requests refused), or an error (the job raised).
"""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa

from cluster.config.loader import apply_overrides
from cluster.config.schema import get_path
from cluster.explore.trials import FULL, NOT_RUN

FEASIBLE = "feasible"
ORDER = ("feasible", "stopped by successive halving", "rejected before running", "invalid config",
         "infeasible", "deadlocked", "cut off", "failed", "error")


def _constraint_failed(spec, row: dict) -> list[str]:
    """The constraints on results that ``row`` breaks (config keys read from the trial's config)."""
    params = json.loads(row.get("params") or "{}")
    cfg = apply_overrides(spec.base, list(params.items()))
    out = []
    for k in spec.constraints:
        if k.on_config:
            continue
        try:
            ok = k.constraint.holds(lambda key: row[key] if key in row else get_path(cfg, key))
        except (TypeError, ValueError, ArithmeticError, KeyError):
            ok = False
        if not ok:
            out.append(k.constraint.text)
    return out


def verdict(spec, row: dict) -> str:
    """How the trial whose last stored run is ``row`` ended (one of ORDER, with a constraint's text after
    'infeasible: ' or 'rejected before running: ')."""
    fidelity, status = row.get("fidelity"), row.get("status")
    if fidelity == NOT_RUN:
        error = row.get("point_error") or ""
        if error.startswith("known constraint violated: "):
            return f"rejected before running: {error.removeprefix('known constraint violated: ')}"
        return "invalid config"
    if row.get("point_status") != "ok":
        return "error"
    if row.get("feasible") and fidelity == FULL:
        return FEASIBLE
    if fidelity != FULL and status == "cut_off":  # a cheap rung's run, not promoted (or with no number yet)
        return "stopped by successive halving"
    if status in ("deadlocked", "failed"):
        return status
    if status == "cut_off":
        return "cut off"
    broken = _constraint_failed(spec, row)
    return f"infeasible: {', '.join(broken)}" if broken else "infeasible: no number for an objective"


def tally(spec, table: pa.Table | None) -> Counter:
    """Trials by how they ended, from the stored trials table (rows by trial, then rung)."""
    if table is None or not table.num_rows:
        return Counter()
    last: dict[int, dict] = {}
    for row in table.sort_by([("trial", "ascending"), ("rung", "ascending")]).to_pylist():
        if row["trial"] not in last or row["fidelity"] == FULL or last[row["trial"]]["fidelity"] != FULL:
            last[row["trial"]] = row
    return Counter(verdict(spec, r) for r in last.values())


def line(counts: Counter) -> str:
    """'12 trials: 5 feasible, 4 stopped by successive halving, 1 infeasible: latency_p99_cycles <= 4000000, ...'."""
    def rank(k: str) -> int:
        head = k.split(":")[0]
        return ORDER.index(head) if head in ORDER else len(ORDER)

    total = sum(counts.values())
    parts = [f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (rank(kv[0]), kv[0]))]
    return f"{total} trial{'s' if total != 1 else ''}: " + ("; ".join(parts) if parts else "none stored")

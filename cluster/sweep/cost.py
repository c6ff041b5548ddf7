"""A point's predicted cost before it runs, for the ETA (cluster/progress.py ``WorkEta``): relative, not seconds.

What is known from a config alone: a NoC point simulates rows x cols routers for its warm-up
and measurement cycles (and drains them), and its per-cycle work grows with the offered load
(flits in flight); a noop point sleeps. A chip or system run stops when its work is done, which
its config says only as the work items it names (requests, steps, trials): its prior is their
number, and what a policy or a protocol makes them cost is learned from the points that finish
(``WorkEta`` fits one effect per swept value). The features are the point's swept values: the
learned effects attach to them.
"""

from __future__ import annotations

from collections.abc import Iterable

WORK_ITEMS = ("requests", "steps", "trials")  # what a workload's config counts its work in (0: all of a trace)


def prior(command: str, config: dict) -> float:
    """The relative cost of a point of ``command`` with this resolved ``config``."""
    if command == "noc":
        noc = config.get("noc") or {}
        rows = noc.get("rows") or noc.get("k") or 8
        cols = noc.get("cols") or noc.get("k") or 8
        cycles = (noc.get("warmup_cycles") or 0) + (noc.get("measure_cycles") or 0) or 1
        return float(rows * cols * cycles * (1.0 + 2.0 * float(noc.get("rate") or 0.0)))
    if command == "noop":
        return 0.01 + float((config.get("noop") or {}).get("sleep") or 0.0)
    for section in (config.get("workload") or {}).values():  # run, system: the work items the workload names
        if isinstance(section, dict):
            items = [v for k, v in section.items() if k in WORK_ITEMS and isinstance(v, int) and v > 0]
            if items:
                return float(items[0])
    return 1.0


def features(values: dict) -> Iterable[tuple]:
    """(path, value) of each swept value, hashable (tables and lists as their text)."""
    return tuple((path, v if isinstance(v, (str, int, float, bool)) or v is None else repr(v))
                 for path, v in sorted(values.items()))

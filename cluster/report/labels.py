"""Axis labels with units: for swept config paths from the command's schema, for metrics from
the result schemas (cluster/results/schemas.py), so a figure never shows a bare column name."""

from __future__ import annotations

import re
from functools import cache

from cluster.results import schemas

# metrics whose schema line is long or has its unit in the middle: the label a paper would print
METRICS = {
    "avg_latency": "mean packet latency (cycles)",
    "p50_latency": "median packet latency (cycles)",
    "p99_latency": "p99 packet latency (cycles)",
    "max_latency": "largest packet latency (cycles)",
    "accepted": "accepted throughput (flits/node/cycle)",
    "offered": "offered load (flits/node/cycle)",
    "rate": "offered load (flits/node/cycle)",
    "tokens_per_second": "throughput (tokens/s)",
    "peak_mu_utilization": "peak MU utilisation (share of MU bytes)",
    "mean_mu_utilization": "mean MU utilisation (share of MU bytes)",
    "peak_mu_reserved": "peak MU reservation (share of MU bytes)",
    "bytes_copied": "bytes copied by realloc (B)",
    "sync_wait_cycles": "synchronisation wait (cycles, summed over tasks)",
    "sync_messages": "synchronisation messages",
    "latency_p50_cycles": "median request latency (cycles)",
    "latency_p99_cycles": "p99 request latency (cycles)",
    "use_after_free": "use-after-free events (oracle)",
    "wall_seconds": "wall-clock time (s)",
    "value": "noop.value",
}
_UNIT_AT_END = re.compile(r"^(.*?),\s*(cycles|s|bytes|B|flits/node/cycle|\$|W)$")


@cache
def _metric_docs() -> dict[str, str]:
    return {c.name: c.doc for t in schemas.ALL_TABLES for c in t.columns}


def metric(name: str) -> str:
    """'avg_latency' -> 'mean packet latency (cycles)'; unknown columns keep their name."""
    if name in METRICS:
        return METRICS[name]
    doc = _metric_docs().get(name)
    if not doc:
        return name
    m = _UNIT_AT_END.match(doc)
    text, unit = (m.group(1), m.group(2)) if m else (doc, "")
    text = text.split(" (")[0] if len(text) > 50 else text
    return f"{text} ({unit})" if unit else text


@cache
def _axis_fields(command: str) -> dict[str, tuple[str, str]]:
    """Dataset column of each config path -> (dotted path, unit), for the sweep's command."""
    from cluster.config.schema import walk
    from cluster.sweep.commands import get

    try:
        schema = get(command).schema()
    except Exception:  # noqa: BLE001 - labels are a nicety: a missing command keeps the column name
        return {}
    return {path.replace(".", "_"): (path, getattr(node, "unit", "") or "") for path, node in walk(schema)}


def _field_of(command: str, column: str) -> tuple[str, str] | None:
    """(config path, unit) of a dataset column; system_network_0_size -> system.network[0].size."""
    fields = _axis_fields(command)
    if column in fields:
        return fields[column]
    import re

    m = re.match(r"^(.+?)_(\d+)_(.+)$", column)  # a table of an array of tables (sweep/layout.py)
    if m and f"{m.group(1)}[]_{m.group(3)}" in fields:
        path, unit = fields[f"{m.group(1)}[]_{m.group(3)}"]
        return path.replace("[]", f"[{m.group(2)}]"), unit
    return None


def axis(command: str, column: str) -> str:
    """'noc_rate' -> 'noc.rate (flits/node/cycle)': the config path as written in specs, with its unit."""
    path, unit = _field_of(command, column) or (column, "")
    return f"{path} ({unit})" if unit else path


def value(column: str, v) -> str:
    """A swept value as shown in a legend or panel title."""
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def condition(command: str, column: str, v) -> str:
    """'noc.rate = 0.1 flits/node/cycle': a panel's fixed value of a swept axis."""
    path, unit = _field_of(command, column) or (column, "")
    return f"{path} = {value(column, v)}" + (f" {unit}" if unit else "")

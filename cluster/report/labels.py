"""Axis labels with units: for swept config paths from the command's schema, for metrics from
the result schemas (cluster/results/schemas.py), so a figure never shows a bare column name."""

from __future__ import annotations

import re
from functools import cache

from cluster.report import units
from cluster.results import schemas

# metrics whose schema line is long or has its unit in the middle: (what a paper would print, unit)
METRICS = {
    "avg_latency": ("mean packet latency", "cycles"),
    "p50_latency": ("median packet latency", "cycles"),
    "p99_latency": ("p99 packet latency", "cycles"),
    "max_latency": ("largest packet latency", "cycles"),
    "accepted": ("accepted throughput", "flits/node/cycle"),
    "offered": ("offered load", "flits/node/cycle"),
    "rate": ("offered load", "flits/node/cycle"),
    "tokens_per_second": ("throughput", "tokens/s"),
    "peak_mu_utilization": ("peak MU utilisation", "share of MU bytes"),
    "mean_mu_utilization": ("mean MU utilisation", "share of MU bytes"),
    "peak_mu_reserved": ("peak MU reservation", "share of MU bytes"),
    "bytes_copied": ("bytes copied by realloc", "B"),
    "sync_wait_cycles": ("synchronisation wait", "cycles, summed over tasks"),
    "sync_messages": ("synchronisation messages", ""),
    "latency_p50_cycles": ("median request latency", "cycles"),
    "latency_p99_cycles": ("p99 request latency", "cycles"),
    "use_after_free": ("use-after-free events (oracle)", ""),
    "wall_seconds": ("wall-clock time", "s"),
    "energy_joules": ("dynamic energy", "J"),
    "energy_per_token_joules": ("energy per token", "J"),
    "step_seconds_mean": ("mean expert-parallel step", "s"),
    "sim_seconds": ("simulated time", "s"),
    "bytes_total": ("bytes between chips", "B"),
    "landing_bytes_peak": ("most bytes landed on a chip in a step", "B"),
    "expert_imbalance": ("expert imbalance (busiest chip / mean tokens)", ""),
    "seconds_per_batch_simulated": ("simulated time per batch", "s"),
    "bubble_fraction": ("pipeline bubble (share of the run)", ""),
    "value": ("noop.value", ""),
    **{f"{m}_p{q}_seconds": (f"{'median' if q == 50 else f'p{q}'} {what}", "s")
       for m, what in (("ttft", "TTFT"), ("tbt", "TBT"), ("e2e", "end-to-end latency")) for q in (50, 90, 99)},
    "goodput_requests_per_second": ("goodput", "requests/s"),
    "slo_attainment": ("SLO attainment", "share of requests"),
    "slo_ttft_seconds": ("TTFT objective", "s"),
    "slo_tbt_seconds": ("TBT objective", "s"),
    "requests_finished": ("requests served", ""),
    "preemptions": ("preemptions", ""),
    "fragmentation": ("fragmentation", "share of reserved bytes"),
    "step_mean_seconds": ("mean step", "s"),
    "sim_cycles": ("simulated time", "cycles"),
    "prefill_tokens": ("prompt tokens prefilled", ""),
    "anchor_wall_seconds": ("anchor wall time", "s"),
    **{f"{t}_{what}": (f"{t.upper()} {text}", unit) for t in ("hbm", "ddr") for what, text, unit in (
        ("read_bytes", "bytes read", "B"), ("write_bytes", "bytes written", "B"),
        ("peak_bytes", "peak pages", "B"), ("flows", "flows", ""))},
}
# an energy component (sim/energy/table.py's COMPONENTS) as a paper writes it
COMPONENT_NAMES = {"cu": "CU", "mu": "MU", "noc_router": "NoC router", "noc_link": "NoC link",
                   "realloc_copy": "realloc copy", "dram": "DRAM", "hbm": "HBM", "ddr": "DDR",
                   "protocol": "protocol messages"}
_UNIT_AT_END = re.compile(r"^(.*?),\s*(cycles|s|bytes|B|J|W|Hz|B/s|flits/node/cycle|\$)$")
KIND_UNITS = {"size": "B", "frequency": "Hz", "bandwidth": "B/s", "time": "s", "flops": "FLOP/s"}  # config kinds


@cache
def _metric_docs() -> dict[str, str]:
    docs: dict[str, str] = {}
    for t in schemas.ALL_TABLES:  # a column of several tables: its first table's line (the summary's)
        for c in t.columns:
            docs.setdefault(c.name, c.doc)
    return docs


def _unit_of_name(name: str) -> str:
    """A column's unit from its name, where the schema line does not end in one."""
    if name.endswith("_joules"):
        return "J"
    if name.endswith(("_seconds", "_seconds_mean")) or name.startswith("seconds_"):
        return "s"
    return "B" if name.startswith("bytes") or "_bytes" in name else ""


SHORT_DOC = 40  # characters: a schema line this short (its unit at the end) is a label; a longer one never is
_UNIT_SUFFIXES = (("_seconds", "s"), ("_joules", "J"), ("_cycles", "cycles"), ("_bytes", "B"))


def metric_parts(name: str) -> tuple[str, str]:
    """('mean packet latency', 'cycles') for 'avg_latency': the short name a paper prints and its unit,
    from METRICS, else the column's schema line when it is short, else the name itself (its unit from
    its suffix: 'ttft_p99_seconds' is in s). A long schema line is never a label: clipped, it loses the unit."""
    if name in METRICS:
        return METRICS[name]
    if name.startswith("energy_") and name.endswith("_joules") and name[7:-7] in COMPONENT_NAMES:
        return f"{energy_component(name)} energy", "J"
    doc = _metric_docs().get(name, "")
    m = _UNIT_AT_END.match(doc)
    text, unit = (m.group(1), m.group(2)) if m else (doc, _unit_of_name(name))
    if doc and len(text) <= SHORT_DOC and not any(ch in text for ch in "(:;"):
        return text, "B" if unit == "bytes" else unit
    for suffix, own in _UNIT_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)].replace("_", " "), own
    return name.replace("_", " "), _unit_of_name(name)


def metric(name: str, unit: str | None = None) -> str:
    """'avg_latency' -> 'mean packet latency (cycles)'; ``unit`` replaces the unit (a prefixed one: 'uJ')."""
    text, own = metric_parts(name)
    shown = own if unit is None else unit
    return f"{text} ({shown})" if shown else text


@cache
def _axis_fields(command: str) -> dict[str, tuple[str, str]]:
    """Dataset column of each config path -> (dotted path, unit), for the sweep's command."""
    from cluster.config.schema import walk
    from cluster.sweep.commands import get

    try:
        schema = get(command).schema()
    except Exception:  # noqa: BLE001 - labels are a nicety: a missing command keeps the column name
        return {}
    return {path.replace(".", "_"): (path, getattr(node, "unit", "") or KIND_UNITS.get(getattr(node, "kind", ""), ""))
            for path, node in walk(schema)}


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


def axis_parts(command: str, column: str) -> tuple[str, str]:
    """('noc.rate', 'flits/node/cycle'): a swept column's config path as written in specs, and its unit."""
    return _field_of(command, column) or (column, "")


def axis(command: str, column: str, unit: str | None = None) -> str:
    """'noc_rate' -> 'noc.rate (flits/node/cycle)'; ``unit`` replaces the unit (a prefixed one: 'GB/s')."""
    path, own = axis_parts(command, column)
    shown = own if unit is None else unit
    return f"{path} ({shown})" if shown else path


def value(command: str, column: str, v) -> str:
    """A swept value as a legend or tick shows it, with its unit when it has one: '25 GB/s', '0.1', 'mesh'."""
    _, unit = axis_parts(command, column)
    if isinstance(v, float) and not units.prefixable(unit):
        return f"{v:g}"
    return units.engineering(v, unit) if units.prefixable(unit) else str(v)


def condition(command: str, column: str, v) -> str:
    """'noc.rate = 0.1 flits/node/cycle', 'system.network[0].link_bandwidth = 25 GB/s': a panel's fixed value."""
    path, unit = axis_parts(command, column)
    if units.prefixable(unit):
        return f"{path} = {value(command, column, v)}"
    return f"{path} = {value(command, column, v)}" + (f" {unit}" if unit else "")


def component(name: str) -> str:
    """An energy component's name in a figure: 'NoC router', not 'noc_router'."""
    return COMPONENT_NAMES.get(name, name.replace("_", " "))


def message_type(column: str) -> str:
    """A protocol message column's type in a figure: 'read request' for messages_read_request."""
    return column[len("messages_"):].replace("_", " ")


def energy_component(column: str) -> str:
    """An energy column's component in a figure: 'NoC link' for energy_noc_link_joules."""
    return component(column[len("energy_"):-len("_joules")])

"""Figures of a sweep: any metric against any swept axis, grouped by another axis."""

from __future__ import annotations

from cluster import schemas
from cluster.report.data import Skip, distinct, grouped, numeric, only_ok
from cluster.report.sources import SweepTables
from sim.energy.table import COMPONENTS

PREFERRED = ("avg_latency", "p99_latency", "accepted", "tokens_per_second", "peak_mu_utilization",
             "bytes_copied", "energy_per_token_joules", "sync_wait_cycles", "use_after_free", "value")
NOT_METRICS = {c.name for c in schemas.SWEEP_COLUMNS + schemas.META_COLUMNS}


def metrics(sweep: SweepTables) -> list[str]:
    """Numeric result columns that are not identity or swept columns."""
    t = sweep.result
    return [c for c in t.column_names if c not in NOT_METRICS and c not in sweep.axes and numeric(t, c)]


def default_metrics(sweep: SweepTables, n: int = 4) -> list[str]:
    found = metrics(sweep)
    chosen = [m for m in PREFERRED if m in found]
    return (chosen or found)[:n]


def varied_axes(sweep: SweepTables) -> list[str]:
    t = only_ok(sweep.result)
    return [a for a in sweep.axes if a in t.column_names and len(distinct(t, a)) > 1]


def hue_for(sweep: SweepTables, x: str, max_groups: int = 8) -> str | None:
    """Another varied axis with few values (fewest first), to draw one line per value."""
    t = only_ok(sweep.result)
    options = [(len(distinct(t, a)), a) for a in varied_axes(sweep) if a != x]
    options = sorted(o for o in options if o[0] <= max_groups)
    return options[0][1] if options else None


def metric_vs_axis(sweep: SweepTables, x: str, y: str, hue: str | None, plt):
    t = only_ok(sweep.result)
    for col in (x, y) + ((hue,) if hue else ()):
        if col not in t.column_names:
            raise Skip(f"sweep {sweep.name} has no column {col!r}")
    groups = grouped(t, x, y, hue)
    if not groups:
        raise Skip(f"no finished point has a value of {y}")
    fig, ax = plt.subplots(figsize=(6.5, 4))
    categorical = not numeric(t, x)
    labels = sorted({v for xs, *_ in groups.values() for v in xs}, key=str) if categorical else None
    for value, (xs, ys, lo, hi) in groups.items():
        pos = [labels.index(v) for v in xs] if categorical else xs
        label = None if hue is None else f"{hue}={value}"
        ax.plot(pos, ys, marker="o", label=label)
        if len(groups) == 1 and any(a != b for a, b in zip(lo, hi)):
            ax.fill_between(pos, lo, hi, alpha=0.2, label="min..max over the other axes")
    if categorical:
        ax.set_xticks(range(len(labels)), [str(v) for v in labels], rotation=30)
    ax.set_xlabel(x)
    ax.set_ylabel(f"{y} (mean over the other axes)")
    ax.set_title(f"{sweep.name}: {y} vs {x}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def message_columns(sweep: SweepTables) -> list[str]:
    t = sweep.result
    return [c for c in t.column_names if c.startswith("messages_") and not c.endswith("_total") and numeric(t, c)]


def messages_vs_axis(sweep: SweepTables, x: str, plt, max_values: int = 12):
    """Protocol messages by type for each value of a swept axis (stacked bars, mean over the rest)."""
    return stacked_vs_axis(sweep, x, message_columns(sweep), lambda c: c[len("messages_"):], "messages",
                           "protocol messages", plt, max_values)


def energy_columns(sweep: SweepTables) -> list[str]:
    t = sweep.result
    return [c for c in (f"energy_{k}_joules" for k in COMPONENTS) if c in t.column_names and numeric(t, c)]


def energy_vs_axis(sweep: SweepTables, x: str, plt, max_values: int = 12):
    """A run's energy by component for each value of a swept axis, e.g. memory.policy (stacked bars)."""
    return stacked_vs_axis(sweep, x, energy_columns(sweep), lambda c: c[len("energy_"):-len("_joules")],
                           "energy (J)", "energy", plt, max_values)


def stacked_vs_axis(sweep: SweepTables, x: str, columns: list[str], label, unit: str, what: str, plt,
                    max_values: int = 12):
    """Columns stacked for each value of a swept axis (bars, mean over the other axes)."""
    t = only_ok(sweep.result)
    if not columns or x not in t.column_names:
        raise Skip(f"no {what} columns in the results")
    means = {k: grouped(t, x, k)[None] for k in columns}
    values = next(iter(means.values()))[0]
    if len(values) > max_values:
        raise Skip(f"{x} has {len(values)} values; at most {max_values} bars")
    columns = [k for k in columns if any(means[k][1])] or columns
    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = [0.0] * len(values)
    for k in columns:
        ys = means[k][1]
        ax.bar([str(v) for v in values], ys, bottom=bottom, label=label(k))
        bottom = [b + y for b, y in zip(bottom, ys)]
    ax.set_xlabel(x)
    ax.set_ylabel(f"{unit} (mean over the other axes)")
    ax.set_title(f"{sweep.name}: {what} by {x}")
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig

"""Figures of a sweep a paper can use: a metric against one swept axis, never averaged over the others.

- Seeds (``run_seed`` and any other ``*_seed`` axis) are replicates: each point is the
  mean over them with a 95 % confidence interval (Student's t) as its error bar.
- Every other varied axis that is neither the x axis nor the hue gets its own panel
  (facets), so unlike conditions are never averaged together.
- Categorical x axes (strings, booleans) are drawn as grouped bars, numeric ones as
  lines with markers; labels carry units.
- Points that did not reach a steady state are marked: a saturated NoC load (its
  measured packets did not drain; still plotted, as latency past saturation is what a
  load-latency curve shows), a run that did not complete (deadlocked, cut off, failed;
  left out of the mean of its seeds, so a deadlock never averages into a throughput).
- Series that coincide are drawn once and labelled with every hue value they stand for,
  instead of hiding one another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa

from cluster.report import labels, units
from cluster.report.data import Skip, distinct, numeric, only_ok
from cluster.report.sources import SweepTables
from cluster.report.style import LINES, MARKERS, Palette, share_y
from cluster.results import schemas
from sim.energy.table import COMPONENTS

# headline metrics of every sweep kind, in the order drawn: noc, run, system (collectives, expert-parallel
# steps, pipelines, grid chips), noop
PREFERRED = ("avg_latency", "p99_latency", "accepted", "tokens_per_second", "peak_mu_utilization",
             "bytes_copied", "energy_per_token_joules", "sync_wait_cycles", "use_after_free",
             "step_seconds_mean", "seconds_per_batch_simulated", "sim_seconds", "expert_imbalance", "bubble_fraction",
             "bytes_total", "value")
NOT_METRICS = {c.name for c in schemas.SWEEP_COLUMNS + schemas.META_COLUMNS} | {"rdasim_dirty"}
MAX_PANELS = 12


def replicate_axes(sweep: SweepTables) -> list[str]:
    """Axes whose values are replicates of one condition (random seeds), not conditions."""
    return [a for a in sweep.axes if a == "seed" or a.endswith("_seed")]


def metrics(sweep: SweepTables) -> list[str]:
    """Numeric result columns that are not identity or swept columns."""
    t = sweep.result
    return [c for c in t.column_names if c not in NOT_METRICS and c not in sweep.axes and numeric(t, c)]


def default_metrics(sweep: SweepTables, n: int = 4) -> list[str]:
    """The first ``n`` headline metrics the finished points have values of (any numeric column otherwise)."""
    t = only_ok(sweep.result)
    found = [m for m in metrics(sweep) if any(t[m].to_pylist())]  # a value other than null and 0
    chosen = [m for m in PREFERRED if m in found]
    return (chosen or found)[:n]


def default_axes(sweep: SweepTables) -> list[str]:
    """The varied axes to draw against: one of each group that moves together (a [[zip]])."""
    rows = only_ok(sweep.result).to_pylist()
    out: list[str] = []
    for a in varied_axes(sweep):
        if not any(_follows(rows, a, b) for b in out):
            out.append(a)
    return out


def varied_axes(sweep: SweepTables) -> list[str]:
    """Swept axes with more than one value among the finished points (seeds excluded)."""
    t = only_ok(sweep.result)
    seeds = set(replicate_axes(sweep))
    return [a for a in sweep.axes if a in t.column_names and a not in seeds and len(distinct(t, a)) > 1]


def hue_for(sweep: SweepTables, x: str, max_groups: int = 8) -> str | None:
    """Another varied axis with few values (fewest first), to draw one series per value."""
    t = only_ok(sweep.result)
    options = [(len(distinct(t, a)), a) for a in varied_axes(sweep) if a != x]
    options = sorted(o for o in options if o[0] <= max_groups)
    return options[0][1] if options else None


def ci95(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95 % confidence interval of the mean; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    from scipy.stats import t as student

    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(student.ppf(0.975, n - 1)) * sd / math.sqrt(n)


@dataclass
class Series:
    """One line (or bar group) of a panel: per x value the mean, CI and whether it is unsteady."""

    hue: list  # the hue values it stands for (several when series coincide)
    xs: list
    means: list[float]
    errors: list[float]
    unsteady: list[bool]
    replicates: int


def _saturated(row: dict) -> bool:
    return bool(row.get("saturated"))


def _incomplete(row: dict) -> bool:
    """A run (rdasim run) that did not complete: its figures are not comparable to the others'."""
    status = row.get("status")
    return status is not None and status != "completed" and "workload" in row


def _sort_key(v):
    return (isinstance(v, str), v) if not isinstance(v, bool) else (False, int(v))


def series_of(rows: list[dict], x: str, y: str, hue: str | None, order: list | None = None) -> list[Series]:
    """Group rows by hue and x (replicates pooled), then merge series whose values coincide.
    ``order``: the x values in the order the spec lists them (others after, sorted)."""
    order = list(order or [])
    acc: dict = {}
    for r in rows:
        yv = r.get(y)
        if r.get(x) is None or yv is None or (isinstance(yv, float) and math.isnan(yv)):
            continue
        cell = acc.setdefault(r.get(hue) if hue else None, {}).setdefault(r[x], ([], [], []))
        cell[0].append(float(yv))
        cell[1].append(_saturated(r))
        cell[2].append(_incomplete(r))
    out: list[Series] = []
    for h in sorted(acc, key=lambda v: (v is None, _sort_key(v) if v is not None else 0)):
        xs = sorted(acc[h], key=lambda v: (order.index(v) if v in order else len(order), _sort_key(v)))
        stats, marks = [], []
        for v in xs:
            values, saturated, incomplete = acc[h][v]
            kept = [val for val, bad in zip(values, incomplete) if not bad] or values  # none completed: show them
            stats.append(ci95(kept))
            marks.append(any(saturated) or any(incomplete))
        s = Series([h], xs, [m for m, _ in stats], [e for _, e in stats], marks,
                   max(len(acc[h][v][0]) for v in xs))
        same = next((o for o in out if o.xs == s.xs and o.means == s.means and o.errors == s.errors), None)
        if same is not None:
            same.hue.append(h)
        else:
            out.append(s)
    return out


def _facets(rows: list[dict], axes: list[str], shown: tuple) -> list[str]:
    """The varied axes that need panels of their own: not those shown, nor those that move with
    one shown (a [[zip]] partner: system.network[0].size beside system.chips)."""
    shown = tuple(s for s in shown if s)
    return [a for a in axes if a not in shown and not any(_follows(rows, a, s) for s in shown)]


def _follows(rows: list[dict], a: str, s: str) -> bool:
    """Axis ``a`` has one value for each value of ``s`` (they move together)."""
    return len({(r.get(s), r.get(a)) for r in rows}) == len({r.get(s) for r in rows})


def _panels(rows: list[dict], facets: list[str], orders: dict | None = None) -> list[tuple[dict, list[dict]]]:
    """One (fixed values, rows) per combination of the facets' values, in the spec's order."""
    orders = orders or {}
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r.get(f) for f in facets), []).append(r)

    def key(k):
        return [(orders.get(f, []).index(v) if v in orders.get(f, []) else len(orders.get(f, [])), _sort_key(v))
                for f, v in zip(facets, k)]

    return [(dict(zip(facets, k)), groups[k]) for k in sorted(groups, key=key)]


def _legend_label(sweep: SweepTables, hue: str | None, s: Series) -> str | None:
    if hue is None:
        return None
    shown = ", ".join(labels.value(sweep.command, hue, h) for h in s.hue)
    return f"{shown} (identical)" if len(s.hue) > 1 else shown


def _ordered(sweep: SweepTables, t, column: str) -> list:
    """The values of ``column`` in the spec's order (others after, sorted)."""
    order = sweep.orders.get(column, [])
    return sorted(distinct(t, column), key=lambda v: (order.index(v) if v in order else len(order), _sort_key(v)))


def metric_vs_axis(sweep: SweepTables, x: str, y: str, hue: str | None, plt, max_panels: int = MAX_PANELS,
                   palette: Palette | None = None, explicit: bool = False):
    """``y`` against swept axis ``x``: one series per ``hue`` value, one panel per value of each
    other varied axis, seeds pooled into mean and 95 % CI. A metric that is 0 everywhere is
    skipped unless asked for (``explicit``)."""
    palette = palette or Palette()
    t = only_ok(sweep.result)
    for col in (x, y) + ((hue,) if hue else ()):
        if col not in t.column_names:
            raise Skip(f"sweep {sweep.name} has no column {col!r}")
    rows = t.to_pylist()
    facets = _facets(rows, varied_axes(sweep), (x, hue))
    panels = _panels(rows, facets, sweep.orders)
    if len(panels) > max_panels:
        raise Skip(f"{len(panels)} panels (one per value of {', '.join(facets)}); choose axes with --x and --hue")
    order = sweep.orders.get(x, [])
    drawn = [series_of(p, x, y, hue, order) for _, p in panels]
    if not any(drawn):
        raise Skip(f"no finished point has a value of {y}")
    peaks = [max((abs(m) for s in series for m in s.means), default=0.0) for series in drawn]
    if not explicit and not any(peaks):
        raise Skip(f"every value of {y} is 0 (draw it anyway with --y {y})")
    if hue:
        palette.register(hue, _ordered(sweep, t, hue))
    shared = share_y(peaks)
    ncols = min(len(panels), 3)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(4.2 * ncols, 6.0), 3.4 * nrows + 1.4), squeeze=False,
                             sharey=shared, constrained_layout=True)
    categorical = not numeric(t, x)
    cats = _ordered(sweep, t, x) if categorical else []  # the categories' order on the axis (numeric axes: none)
    replicates = 1
    handles: dict = {}
    for ax, (where, _), series in zip(axes.flat, panels, drawn):
        for i, s in enumerate(series):
            replicates = max(replicates, s.replicates)
            label = _legend_label(sweep, hue, s)
            color = palette.color(hue, s.hue[0]) if hue else "C0"
            if categorical:
                width = 0.8 / max(len(series), 1)
                pos = [cats.index(v) - 0.4 + width * (i + 0.5) for v in s.xs]
                art = ax.bar(pos, s.means, width * 0.95, yerr=s.errors, capsize=3, label=label,
                             color=color, edgecolor="black", linewidth=0.4)
            else:
                pos = s.xs
                art = ax.errorbar(pos, s.means, yerr=s.errors, capsize=3, markersize=5, label=label, color=color,
                                  marker=palette.marker(hue, s.hue[0]) if hue else MARKERS[0],
                                  linestyle=palette.line(hue, s.hue[0]) if hue else LINES[0])
            if label is not None:
                handles.setdefault(label, art)
            bad = [(p, m) for p, m, u in zip(pos, s.means, s.unsteady) if u]
            if bad:
                mark = ax.scatter([p for p, _ in bad], [m for _, m in bad], s=90, facecolors="none",
                                  edgecolors="red", linewidths=1.5, zorder=5)
                handles.setdefault(_unsteady_label(t), mark)
        if categorical:
            ax.set_xticks(range(len(cats)), [labels.value(sweep.command, x, v) for v in cats],
                          rotation=30 if max(len(labels.value(sweep.command, x, c)) for c in cats) > 6 else 0)
        if where:
            ax.set_title(", ".join(labels.condition(sweep.command, k, v) for k, v in where.items()), fontsize="small")
        ax.grid(True, alpha=0.3)
    _label_axes(fig, axes, len(panels), sweep.command, x, y, shared, categorical,
                not categorical and pa.types.is_integer(t.schema.field(x).type))
    note = (f"mean of {replicates} seeds; error bars: 95 % confidence interval" if replicates > 1
            else "one seed per point")
    fig.suptitle(f"{sweep.name}: {labels.metric_parts(y)[0]}\n{note}", fontsize="medium")
    if handles:
        title = labels.axis(sweep.command, hue, "" if units.prefixable(labels.axis_parts(sweep.command, hue)[1])
                            else None) if hue else None  # prefixed units are in the entries
        mark = _unsteady_label(t)
        if mark in handles:  # the marker's entry last, after the series
            handles[mark] = handles.pop(mark)
        fig.legend(list(handles.values()), list(handles.keys()), title=title, fontsize="small",
                   title_fontsize="small", loc="outside lower center", ncols=min(len(handles), 4))
    return fig


def _label_axes(fig, axes, used: int, command: str, x: str, y: str | tuple[str, str], shared: bool,
                categorical: bool, integer: bool = False) -> None:
    """Hide unused panels; scale each axis to an engineering prefix of its unit; x label under the lowest
    panel of each column, y label on the left (on every panel when their y axes are independent).
    ``y``: a metric column, or (text, unit) of a quantity that is not one."""
    nrows, ncols = axes.shape
    text, yunit = labels.metric_parts(y) if isinstance(y, str) else y
    _, xunit = labels.axis_parts(command, x)
    for i, ax in enumerate(axes.flat):
        if i >= used:
            ax.set_visible(False)
            continue
        r, c = divmod(i, ncols)
        shown = units.apply(ax, "y", yunit)
        if c == 0 or not shared:
            ax.set_ylabel(f"{text} ({shown})" if shown else text)
        lowest = max(rr for rr in range(nrows) if rr * ncols + c < used)
        xshown = xunit if categorical else units.apply(ax, "x", xunit)
        if integer:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if r == lowest:
            ax.set_xlabel(labels.axis(command, x, xshown))


def _unsteady_label(t) -> str:
    if "saturated" in t.column_names:
        return "saturated (did not drain)"
    return "some seeds did not complete\n(left out of the mean; see status)"


def message_columns(sweep: SweepTables) -> list[str]:
    t = sweep.result
    return [c for c in t.column_names if c.startswith("messages_") and not c.endswith("_total") and numeric(t, c)]


def messages_vs_axis(sweep: SweepTables, x: str, plt, max_values: int = 12, palette: Palette | None = None):
    """Protocol messages by type for each value of a categorical swept axis: stacked bars per panel
    of the other varied axes, mean over seeds."""
    return stacked_vs_axis(sweep, x, message_columns(sweep), lambda k: k[len("messages_"):].replace("_", " "),
                           ("messages sent", ""), "protocol messages by type", "message type", plt, max_values,
                           palette)


def energy_columns(sweep: SweepTables) -> list[str]:
    t = sweep.result
    return [c for c in (f"energy_{k}_joules" for k in COMPONENTS) if c in t.column_names and numeric(t, c)]


def energy_vs_axis(sweep: SweepTables, x: str, plt, max_values: int = 12, palette: Palette | None = None):
    """A run's energy by component for each value of a swept axis, e.g. memory.policy: stacked bars
    per panel of the other varied axes, mean over seeds."""
    return stacked_vs_axis(sweep, x, energy_columns(sweep), lambda k: k[len("energy_"):-len("_joules")],
                           ("energy", "J"), "energy by component", "component", plt, max_values, palette)


def stacked_vs_axis(sweep: SweepTables, x: str, kinds: list[str], label, quantity: tuple[str, str], what: str,
                    legend: str, plt, max_values: int = 12, palette: Palette | None = None):
    """Columns stacked for each value of a swept axis, one panel per value of the other varied axes.
    ``quantity``: (what the bars measure, its unit)."""
    palette = palette or Palette()
    t = only_ok(sweep.result)
    if not kinds or x not in t.column_names:
        raise Skip(f"no {what} columns in the results")
    values = _ordered(sweep, t, x)
    if len(values) > max_values:
        raise Skip(f"{x} has {len(values)} values; at most {max_values} bars")
    every = t.to_pylist()
    facets = _facets(every, varied_axes(sweep), (x,))
    panels = _panels(every, facets, sweep.orders)
    if len(panels) > MAX_PANELS:
        raise Skip(f"{len(panels)} panels (one per value of {', '.join(facets)})")
    used = [k for k in kinds if any(r.get(k) for r in every)]
    if not used:
        raise Skip(f"every {what.split(' by ')[0]} column is 0")
    stacks = []
    for _, prows in panels:
        stack = {}
        for k in used:
            ys = []
            for v in values:
                rows = [r for r in prows if r.get(x) == v and r.get(k) is not None]
                rows = [r for r in rows if not _incomplete(r)] or rows  # as in metric_vs_axis
                ys.append(sum(float(r[k]) for r in rows) / len(rows) if rows else 0.0)
            stack[k] = ys
        stacks.append(stack)
    peaks = [max(sum(col) for col in zip(*stack.values())) for stack in stacks]
    shared = share_y(peaks)
    ncols = min(len(panels), 3)
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(4.2 * ncols, 6.0), 3.4 * nrows + 1.6), squeeze=False,
                             sharey=shared, constrained_layout=True)
    for ax, (where, _), stack in zip(axes.flat, panels, stacks):
        bottom = [0.0] * len(values)
        for k, ys in stack.items():
            i = palette.index(legend, label(k))
            ax.bar([labels.value(sweep.command, x, v) for v in values], ys, bottom=bottom, label=label(k),
                   color=f"C{i % 10}", hatch=("", "//", "..")[i // 10 % 3], edgecolor="black", linewidth=0.3)
            bottom = [b + y for b, y in zip(bottom, ys)]
        if where:
            ax.set_title(", ".join(labels.condition(sweep.command, a, v) for a, v in where.items()), fontsize="small")
        ax.tick_params(axis="x", rotation=30)
    _label_axes(fig, axes, len(panels), sweep.command, x, (f"{quantity[0]}, mean over seeds", quantity[1]), shared,
                True)
    fig.suptitle(f"{sweep.name}: {what} (mean over the seeds that completed)", fontsize="medium")
    h, lab = axes.flat[0].get_legend_handles_labels()
    fig.legend(h, lab, fontsize="x-small", loc="outside lower center", ncols=min(len(h), 5), title=legend,
               title_fontsize="small")
    return fig

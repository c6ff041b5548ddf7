"""Figures of a sweep a paper can use: a metric against one swept axis, never averaged over the others.

- Seeds (``run_seed`` and any other ``*_seed`` axis) are replicates: each value is the mean
  over them with a 95 % confidence interval (Student's t) as its error bar, and the figure
  says which: "1 seed per point", "seeds identical", "mean of n seeds".
- Every other varied axis that is neither the x axis nor the hue gets its own panel (facets),
  so unlike conditions are never averaged together; only the combinations the sweep has
  become panels, and a panel shows only the x values it has.
- Categorical x axes (strings, booleans) are grouped bars, numeric ones lines with markers;
  one colour per hue value in every panel and figure of a report; labels carry units with
  one SI prefix per quantity (µJ, GB/s).
- A run that did not complete (deadlocked, cut off, failed, an error row) is never a value:
  a cell none of whose runs completed is a gap whose mark says why, and a cell some of
  whose seeds did not complete is the mean of those that did, marked. A saturated NoC load
  is a value (latency past saturation is what a load-latency curve shows), marked.
"""

from __future__ import annotations

from collections import Counter

from cluster.report import cells, labels, units
from cluster.report.cells import Cell, Panel, ci95, in_order  # noqa: F401 - ci95: the figures' interval
from cluster.report.data import Skip, distinct, numeric, only_ok
from cluster.report.sources import SweepTables
from cluster.report.style import (
    GAP_MARKERS,
    GAP_Y,
    LINES,
    MARKERS,
    TICK_SIZE,
    Palette,
    fit_categories,
    gap_label,
    share_y,
    wrap,
)
from cluster.results import schemas
from cluster.sweep.outcomes import COMPLETED, OUTCOMES, row_outcome
from sim.energy.table import COMPONENTS

# headline metrics of every sweep kind, in the order drawn: noc, run, system (collectives, expert-parallel
# steps, pipelines, grid chips), noop
PREFERRED = ("avg_latency", "p99_latency", "accepted", "tokens_per_second", "peak_mu_utilization",
             "bytes_copied", "energy_per_token_joules", "sync_wait_cycles", "use_after_free",
             "step_seconds_mean", "seconds_per_batch_simulated", "sim_seconds", "expert_imbalance", "bubble_fraction",
             "bytes_total", "value")
# a serving sweep's (its points served requests): latency percentiles, goodput, SLO attainment, throughput
SERVING = ("ttft_p50_seconds", "ttft_p99_seconds", "tbt_p50_seconds", "tbt_p99_seconds",
           "goodput_requests_per_second", "slo_attainment", "tokens_per_second")
NOT_METRICS = {c.name for c in schemas.SWEEP_COLUMNS + schemas.META_COLUMNS} | {"rdasim_dirty"}
MAX_PANELS = 12
PANEL_WIDTH, PANEL_HEIGHT = 4.2, 3.0  # inches
TITLE_SIZE = 8.3  # points: matplotlib's "small" at its default 10 pt
PARTIAL_LABEL = "some seeds did not complete\n(left out of the mean)"
SATURATED_LABEL = "saturated (did not drain)"


OUTCOME_COLUMNS = ("point_status", "status", "workload", "saturated")  # what a row's outcome is read from


def rows_of(sweep: SweepTables, *columns: str) -> list[dict]:
    """The result rows with the swept columns, the outcome's and ``columns`` only (a run's summary has ~150)."""
    t = sweep.result
    keep = list(dict.fromkeys(c for c in (*sweep.axes, *OUTCOME_COLUMNS, *columns) if c in t.column_names))
    return t.select(keep).to_pylist()


def replicate_axes(sweep: SweepTables) -> list[str]:
    """Axes whose values are replicates of one condition (random seeds), not conditions."""
    return [a for a in sweep.axes if a == "seed" or a.endswith("_seed")]


def metrics(sweep: SweepTables) -> list[str]:
    """Numeric result columns that are not identity or swept columns."""
    t = sweep.result
    return [c for c in t.column_names if c not in NOT_METRICS and c not in sweep.axes and numeric(t, c)]


def default_metrics(sweep: SweepTables, n: int = 4) -> list[str]:
    """The first ``n`` headline metrics the finished points have values of (any numeric column otherwise);
    a serving sweep's are its latency percentiles, goodput, SLO attainment and throughput."""
    t = only_ok(sweep.result)
    found = [m for m in metrics(sweep) if any(t[m].to_pylist())]  # a value other than null and 0
    serving = [m for m in SERVING if m in found]
    if "ttft_p50_seconds" in serving:
        return serving
    chosen = [m for m in PREFERRED if m in found]
    return (chosen or found)[:n]


def default_axes(sweep: SweepTables) -> list[str]:
    """The varied axes to draw against: one of each group that moves together (a [[zip]]); of three or more,
    those with more than two values (a two-valued axis is drawn as the series or the panels of the others)."""
    rows = rows_of(sweep)
    out: list[str] = []
    for a in varied_axes(sweep):
        if not any(_follows(rows, a, b) for b in out):
            out.append(a)
    wide = [a for a in out if len(distinct(sweep.result, a)) > 2]
    return wide if len(out) > 2 and wide else out


def varied_axes(sweep: SweepTables) -> list[str]:
    """Swept axes with more than one value among the stored points (seeds excluded)."""
    t = sweep.result
    seeds = set(replicate_axes(sweep))
    return [a for a in sweep.axes if a in t.column_names and a not in seeds and len(distinct(t, a)) > 1]


def hue_for(sweep: SweepTables, x: str, max_groups: int = 8) -> str | None:
    """Another varied axis with few values (fewest first), to draw one series per value."""
    t = sweep.result
    options = [(len(distinct(t, a)), a) for a in varied_axes(sweep) if a != x]
    options = sorted(o for o in options if o[0] <= max_groups)
    return options[0][1] if options else None


def _facets(rows: list[dict], axes: list[str], shown: tuple) -> list[str]:
    """The varied axes that need panels of their own: not those shown, nor those that move with
    one shown (a [[zip]] partner: system.network[0].size beside system.chips)."""
    shown = tuple(s for s in shown if s)
    return [a for a in axes if a not in shown and not any(_follows(rows, a, s) for s in shown)]


def _follows(rows: list[dict], a: str, s: str) -> bool:
    """Axis ``a`` has one value for each value of ``s`` (they move together)."""
    return len({(r.get(s), r.get(a)) for r in rows}) == len({r.get(s) for r in rows})


class Legend:
    """A figure's legend entries in a fixed order: the series, then the marks that say why a value is missing."""

    def __init__(self) -> None:
        self.series: dict[str, object] = {}
        self.marks: dict[str, object] = {}

    def gap(self, outcome: str) -> None:
        from matplotlib.lines import Line2D

        self.marks.setdefault(gap_label(outcome), Line2D([], [], marker=GAP_MARKERS[outcome], linestyle="none",
                                                         color="0.55", markeredgecolor="black", markersize=7))

    def circle(self, label: str) -> None:
        from matplotlib.lines import Line2D

        self.marks.setdefault(label, Line2D([], [], marker="o", linestyle="none", markerfacecolor="none",
                                            markeredgecolor="red", markeredgewidth=1.5, markersize=9))

    def draw(self, fig, title: str | None, ncols: int = 4) -> None:
        order = [g for g in (gap_label(o) for o in (*OUTCOMES, cells.NO_VALUE)) if g in self.marks]
        marks = {k: self.marks[k] for k in order + [k for k in self.marks if k not in order]}
        entries = {**self.series, **marks}
        if entries:
            fig.legend(list(entries.values()), list(entries.keys()), title=title, fontsize="small",
                       title_fontsize="small", loc="outside lower center", ncols=min(len(entries), ncols))


def _figure(plt, n: int, shared: bool, extra: float = 1.4):
    """A figure of ``n`` panels (at most 3 a row); the used axes in order, and the grid's shape."""
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    fig = plt.figure(figsize=(max(PANEL_WIDTH * ncols, 6.0), PANEL_HEIGHT * nrows + extra), layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False, sharey=shared)
    for ax in grid.flat[n:]:
        fig.delaxes(ax)
    return fig, list(grid.flat[:n]), (nrows, ncols)


def _panel_width_points(ncols: int) -> float:
    return max(PANEL_WIDTH * ncols, 6.0) / ncols * 72 * 0.82  # less the y ticks and label


def _title(ax, sweep: SweepTables, where: dict, ncols: int) -> None:
    """The panel's fixed values, one condition a line, wrapped to the panel's width."""
    if where:
        lines = [labels.condition(sweep.command, k, v) for k, v in where.items()]
        ax.set_title(wrap(lines, _panel_width_points(ncols), TITLE_SIZE), fontsize=TITLE_SIZE)


def _gap(ax, pos: float, outcome: str, color, legend: Legend) -> None:
    """A mark on the baseline at ``pos`` saying why no value is drawn there."""
    from matplotlib.transforms import blended_transform_factory

    on_baseline = blended_transform_factory(ax.transData, ax.transAxes)
    ax.plot([pos], [GAP_Y], marker=GAP_MARKERS[outcome], linestyle="none", color=color, markeredgecolor="black",
            markersize=7, transform=on_baseline, clip_on=False, zorder=6)
    legend.gap(outcome)


def _zero(ax, pos: float, color) -> None:
    """'0' written on the baseline where a bar's height is 0 (else it could not be told from no bar)."""
    from matplotlib.transforms import blended_transform_factory

    ax.text(pos, GAP_Y / 3, "0", transform=blended_transform_factory(ax.transData, ax.transAxes), ha="center",
            va="bottom", fontsize="small", color=color, fontweight="bold")


def _circle(ax, xs: list, ys: list, label: str, legend: Legend) -> None:
    if xs:
        ax.scatter(xs, ys, s=90, facecolors="none", edgecolors="red", linewidths=1.5, zorder=5)
        legend.circle(label)


def _seeds(ax, pos: float, cell: Cell, color) -> None:
    """Each seed's value as a dot at ``pos`` where there are too few for an interval (Cell.shown_values)."""
    if cell.shown_values:
        ax.scatter([pos] * len(cell.shown_values), cell.shown_values, s=16, facecolors="white", edgecolors=color,
                   linewidths=1.2, zorder=4)


def _group_size(figure: list[Panel]) -> int:
    """The most bars at one x value of any panel: every bar of the figure is as wide as in the fullest group."""
    return max(sum(v in s.cells for s in p.series) for p in figure for v in p.xs)


def _bars(ax, panel: Panel, x_labels: list[str], hue: str | None, palette: Palette, names: dict,
          legend: Legend, ncols: int, group: int) -> None:
    """Grouped bars: at each x value, one bar per hue value the panel has there (a gap mark for no value)."""
    present = {v: [s for s in panel.series if v in s.cells] for v in panel.xs}
    width = 0.8 / group
    partial: tuple[list, list] = ([], [])
    saturated: tuple[list, list] = ([], [])
    for s in panel.series:
        color = palette.color(hue, s.hue) if hue else "C0"
        pos, heights, errors = [], [], []
        for i, v in enumerate(panel.xs):
            if v not in s.cells:
                continue
            here = present[v]
            p = i + (here.index(s) - (len(here) - 1) / 2) * width
            cell = s.cells[v]
            if cell.gap:
                _gap(ax, p, cell.gap, color, legend)
                continue
            pos.append(p)
            heights.append(cell.mean)
            errors.append(cell.error)
            _seeds(ax, p, cell, color)
            if cell.mean == 0:  # a bar of height 0 is a value, not a missing one: say so
                _zero(ax, p, color)
            if cell.saturated:
                saturated[0].append(p)
                saturated[1].append(cell.mean)
            elif cell.partial:
                partial[0].append(p)
                partial[1].append(cell.mean)
        if pos:
            art = ax.bar(pos, heights, width * 0.95, yerr=errors if any(errors) else None, capsize=3,
                         color=color, edgecolor="black", linewidth=0.4, label=names.get(s.hue))
            if hue:
                legend.series.setdefault(names[s.hue], art)
        elif hue:
            from matplotlib.patches import Patch

            legend.series.setdefault(names[s.hue], Patch(facecolor=color, edgecolor="black", linewidth=0.4))
    _circle(ax, saturated[0], saturated[1], SATURATED_LABEL, legend)
    _circle(ax, partial[0], partial[1], PARTIAL_LABEL, legend)
    fit_categories(ax, x_labels, _panel_width_points(ncols), TICK_SIZE)


def _lines(ax, panel: Panel, hue: str | None, palette: Palette, names: dict, legend: Legend) -> None:
    """One line per hue value, broken where a value is missing (a gap mark on the baseline says why)."""
    partial: tuple[list, list] = ([], [])
    saturated: tuple[list, list] = ([], [])
    for s in panel.series:
        color = palette.color(hue, s.hue) if hue else "C0"
        xs = sorted(s.cells, key=cells.sort_key)
        ys = [s.cells[v].mean if s.cells[v].values else float("nan") for v in xs]
        errs = [s.cells[v].error if s.cells[v].values else 0.0 for v in xs]
        art = ax.errorbar(xs, ys, yerr=errs if any(errs) else None, capsize=3, markersize=5, color=color,
                          marker=palette.marker(hue, s.hue) if hue else MARKERS[0],
                          linestyle=palette.line(hue, s.hue) if hue else LINES[0], label=names.get(s.hue))
        if hue:
            legend.series.setdefault(names[s.hue], art)
        for v, y in zip(xs, ys):
            cell = s.cells[v]
            _seeds(ax, v, cell, color)
            if cell.gap:
                _gap(ax, v, cell.gap, color, legend)
            elif cell.saturated:
                saturated[0].append(v)
                saturated[1].append(y)
            elif cell.partial:
                partial[0].append(v)
                partial[1].append(y)
    _circle(ax, saturated[0], saturated[1], SATURATED_LABEL, legend)
    _circle(ax, partial[0], partial[1], PARTIAL_LABEL, legend)


def _series_names(sweep: SweepTables, hue: str | None, figure: list[Panel], lines: bool) -> dict:
    """hue value -> its legend entry; a line equal to an earlier one in every panel says so (it hides under it)."""
    if not hue:
        return {}
    same = cells.same_as(figure) if lines else {}
    out = {}
    for p in figure:
        for s in p.series:
            name = labels.value(sweep.command, hue, s.hue)
            if s.hue in same:
                name += f" (= {labels.value(sweep.command, hue, same[s.hue])})"
            out[s.hue] = name
    return out


def metric_vs_axis(sweep: SweepTables, x: str, y: str, hue: str | None, plt, max_panels: int = MAX_PANELS,
                   palette: Palette | None = None, explicit: bool = False):
    """``y`` against swept axis ``x``: one series per ``hue`` value, one panel per combination of the other
    varied axes the sweep has, seeds pooled into mean and 95 % CI. A metric that is 0 everywhere is
    skipped unless asked for (``explicit``)."""
    palette = palette or Palette()
    t = sweep.result
    for col in (x, y) + ((hue,) if hue else ()):
        if col not in t.column_names:
            raise Skip(f"sweep {sweep.name} has no column {col!r}")
    rows = rows_of(sweep, y)
    facets = _facets(rows, varied_axes(sweep), (x, hue))
    figure = cells.panels(rows, x, y, hue, facets, sweep.orders)
    if len(figure) > max_panels:
        raise Skip(f"{len(figure)} panels (one per value of {', '.join(facets)}); choose axes with --x and --hue")
    drawn = [[c for s in p.series for c in s.cells.values() if c.values] for p in figure]
    if not any(drawn):
        raise Skip(f"no run that completed has a value of {y}")
    peaks = [max((abs(c.mean) for c in panel), default=0.0) for panel in drawn]
    if not explicit and not any(peaks):
        raise Skip(f"every value of {y} is 0 (draw it anyway with --y {y})")
    if hue:
        palette.register(hue, in_order(distinct(t, hue), sweep.orders.get(hue)))
    shared = share_y(peaks)
    fig, axes, (nrows, ncols) = _figure(plt, len(figure), shared)
    categorical = not numeric(t, x)
    names = _series_names(sweep, hue, figure, lines=not categorical)
    legend = Legend()
    for ax, panel in zip(axes, figure):
        if categorical:
            _bars(ax, panel, [labels.value(sweep.command, x, v) for v in panel.xs], hue, palette, names, legend,
                  ncols, _group_size(figure))
        else:
            _lines(ax, panel, hue, palette, names, legend)
        _title(ax, sweep, panel.where, ncols)
        ax.grid(True, alpha=0.3)
    largest = max(abs(c.mean) + c.error for panel in drawn for c in panel)
    _label_axes(axes, ncols, sweep.command, x, y, shared, categorical, largest,
                not categorical and _integer(t, x))
    statement = cells.seed_statement(figure, bool(replicate_axes(sweep)))
    fig.suptitle(f"{sweep.name}: {labels.metric_parts(y)[0]}\n{statement}", fontsize="medium")
    title = labels.axis(sweep.command, hue, "" if units.prefixable(labels.axis_parts(sweep.command, hue)[1])
                        else None) if hue else None  # prefixed units are in the entries
    legend.draw(fig, title)
    return fig


def _integer(t, x: str) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t.schema.field(x).type)


def _label_axes(axes: list, ncols: int, command: str, x: str, y: str | tuple[str, str], shared: bool,
                categorical: bool, largest: float, integer: bool = False) -> None:
    """One engineering prefix of the y unit for every panel (from ``largest``, the largest value drawn); x
    label under the lowest panel of each column, y label on the left (on every panel when their y axes
    are independent). ``y``: a metric column, or (text, unit) of a quantity that is not one."""
    text, yunit = labels.metric_parts(y) if isinstance(y, str) else y
    _, xunit = labels.axis_parts(command, x)
    used = len(axes)
    for i, ax in enumerate(axes):
        r, c = divmod(i, ncols)
        shown = units.apply(ax, "y", yunit, largest)
        if c == 0 or not shared:
            ax.set_ylabel(f"{text} ({shown})" if shown else text)
        lowest = max(rr for rr in range(-(-used // ncols)) if rr * ncols + c < used)
        xshown = xunit if categorical else units.apply(ax, "x", xunit)
        if integer:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if r == lowest:
            ax.set_xlabel(labels.axis(command, x, xshown))


def message_columns(sweep: SweepTables) -> list[str]:
    t = sweep.result
    return [c for c in t.column_names if c.startswith("messages_") and not c.endswith("_total") and numeric(t, c)]


def messages_vs_axis(sweep: SweepTables, x: str, plt, max_values: int = 12, palette: Palette | None = None):
    """Protocol messages by type for each value of a categorical swept axis: stacked bars per panel
    of the other varied axes, mean over the seeds that completed."""
    return stacked_vs_axis(sweep, x, message_columns(sweep), labels.message_type,
                           ("messages sent", ""), "protocol messages by type", "message type", plt, max_values,
                           palette)


def energy_columns(sweep: SweepTables) -> list[str]:
    t = sweep.result
    return [c for c in (f"energy_{k}_joules" for k in COMPONENTS) if c in t.column_names and numeric(t, c)]


def energy_vs_axis(sweep: SweepTables, x: str, plt, max_values: int = 12, palette: Palette | None = None):
    """A run's energy by component for each value of a swept axis, e.g. memory.policy: stacked bars
    per panel of the other varied axes, mean over the seeds that completed."""
    return stacked_vs_axis(sweep, x, energy_columns(sweep), labels.energy_component,
                           ("energy", "J"), "energy by component", "component", plt, max_values, palette)


def stacked_vs_axis(sweep: SweepTables, x: str, kinds: list[str], label, quantity: tuple[str, str], what: str,
                    legend_title: str, plt, max_values: int = 12, palette: Palette | None = None):
    """Columns stacked for each value of a swept axis, one panel per combination of the other varied axes
    the sweep has; a value none of whose runs completed is a gap mark. ``quantity``: (what the bars
    measure, its unit)."""
    palette = palette or Palette()
    t = sweep.result
    if not kinds or x not in t.column_names:
        raise Skip(f"no {what} columns in the results")
    values = in_order(distinct(t, x), sweep.orders.get(x))
    if len(values) > max_values:
        raise Skip(f"{x} has {len(values)} values; at most {max_values} bars")
    every = rows_of(sweep, *kinds)
    facets = _facets(every, varied_axes(sweep), (x,))
    groups = cells.facet_rows(every, facets, sweep.orders)
    if len(groups) > MAX_PANELS:
        raise Skip(f"{len(groups)} panels (one per value of {', '.join(facets)})")
    done = [r for r in every if row_outcome(r) == COMPLETED]
    used = [k for k in kinds if any(r.get(k) for r in done)]
    if not used:
        raise Skip(f"every {what.split(' by ')[0]} column of the runs that completed is 0")
    stacks: list[dict] = []  # per panel: x -> {kind: mean over the runs that completed} (none: a gap)
    totals: list[dict] = []  # per panel: x -> a Cell of the runs' totals (its outcomes say why a gap is one)
    for _, prows in groups:
        stack, total = {}, {}
        for v in in_order({r.get(x) for r in prows if r.get(x) is not None}, sweep.orders.get(x)):
            at = [r for r in prows if r.get(x) == v]
            ok = [r for r in at if row_outcome(r) == COMPLETED]
            total[v] = Cell([sum(float(r.get(k) or 0.0) for k in used) for r in ok],
                            Counter(row_outcome(r) for r in at))
            if ok:
                stack[v] = {k: sum(float(r.get(k) or 0.0) for r in ok) / len(ok) for k in used}
        stacks.append(stack)
        totals.append(total)
    peaks = [max((c.mean for c in total.values() if c.values), default=0.0) for total in totals]
    shared = share_y(peaks)
    fig, axes, (_, ncols) = _figure(plt, len(groups), shared, extra=1.6)
    legend = Legend()
    for ax, (where, _), stack, total in zip(axes, groups, stacks, totals):
        xs = list(total)
        bottom = [0.0] * len(xs)
        for k in used:
            ys = [stack[v][k] if v in stack else 0.0 for v in xs]
            i = palette.index(legend_title, label(k))
            art = ax.bar(range(len(xs)), ys, 0.8, bottom=bottom, color=f"C{i % 10}",
                         hatch=("", "//", "..")[i // 10 % 3], edgecolor="black", linewidth=0.3)
            legend.series.setdefault(label(k), art)
            bottom = [b + y for b, y in zip(bottom, ys)]
        for i, v in enumerate(xs):
            gap = total[v].gap
            if gap:
                _gap(ax, i, gap, "0.55", legend)
        fit_categories(ax, [labels.value(sweep.command, x, v) for v in xs], _panel_width_points(ncols), TICK_SIZE)
        _title(ax, sweep, where, ncols)
    _label_axes(axes, ncols, sweep.command, x, (quantity[0], quantity[1]), shared, True, max(peaks))
    panels = [Panel({}, list(total), [cells.Series(None, total)]) for total in totals]
    statement = cells.seed_statement(panels, bool(replicate_axes(sweep)), bars=False)
    fig.suptitle(f"{sweep.name}: {what}, runs that completed\n{statement}", fontsize="medium")
    legend.draw(fig, legend_title, ncols=5)
    return fig

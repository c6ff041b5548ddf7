"""Figures of one run's tables (a `rdasim noc`/`rdasim run` output, or one point of a sweep).

Each function takes the tables by name and matplotlib's pyplot, and returns the figure or
raises Skip. The NoC tables have known columns; the memory tables (rdasim run) are found
by their columns, so a figure appears as soon as a table that has them exists.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cluster.report import labels, units
from cluster.report.data import Skip, containing, find_table, first, grouped, numeric, only_ok, present

DIRECTIONS = ("E", "W", "S", "N")
TIME = ("cycle", "cycles", "time", "t")
UNIT = ("mu", "mu_id", "unit", "unit_id", "memory_unit")
ROW, COL = ("row", "mu_row", "tile_row", "y"), ("col", "mu_col", "tile_col", "x")


def _grid_axes(ax, rows: int, cols: int, most: int = 8) -> None:
    """Row and column numbers; on a wide grid every k-th one, so the labels never run together."""
    ax.set_xticks(range(0, cols, -(-cols // most)))
    ax.set_yticks(range(0, rows, -(-rows // most)))
    ax.set_xlabel("column")
    ax.set_ylabel("row")


def _share(column: str) -> str:
    """'utilization' -> 'MU utilisation (share of its bytes holding data)'."""
    return "MU utilisation (share of its bytes holding data)" if "util" in column else column


def latency_vs_load(tables: dict[str, pa.Table], plt):
    """Mean and p99 packet latency against offered load (the classic NoC curve), saturated loads marked."""
    _, t = find_table(tables, lambda t: "avg_latency" in t.column_names and first(t, ("rate", "offered")))
    t = only_ok(t)
    x = present(first(t, ("rate", "offered")), "offered load")
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    lines = [("avg_latency", "mean", "o", "-")]
    if "p99_latency" in t.column_names:
        lines.append(("p99_latency", "p99", "s", "--"))
    for y, name, marker, style in lines:
        for _, (xs, ys, _, _) in grouped(t, x, y).items():
            ax.plot(xs, ys, marker=marker, linestyle=style, label=name)
    if "saturated" in t.column_names:
        sat = t.filter(pc.equal(t["saturated"], True))
        if sat.num_rows:
            ax.scatter(sat[x].to_pylist(), sat["avg_latency"].to_pylist(), s=110, facecolors="none",
                       edgecolors="red", linewidths=1.5, zorder=5, label="saturated (did not drain)")
    ax.set_xlabel("offered load (flits/node/cycle)")
    ax.set_ylabel("packet latency (cycles)")
    lat = [v for v in t["avg_latency"].to_pylist() if v is not None and v > 0]
    if lat and max(lat) > 20 * min(lat):  # past saturation latency explodes: keep the knee readable
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def link_heatmap(tables: dict[str, pa.Table], plt):
    """Utilisation of every directed link on the router grid, one panel per direction (highest load)."""
    _, t = find_table(tables, lambda t: {"src_row", "src_col", "direction", "utilization"} <= set(t.column_names))
    if "offered_rate" in t.column_names and t.num_rows:
        top = pc.max(t["offered_rate"]).as_py()
        t = t.filter(pc.equal(t["offered_rate"], top))
    rows = int(pc.max(t["src_row"]).as_py()) + 1
    cols = int(pc.max(t["src_col"]).as_py()) + 1
    height = min(9.0, max(3.5, 2 * 3.6 * rows / cols + 1.5))  # a wide grid: short panels, not white space
    fig, axes = plt.subplots(2, 2, figsize=(8, height), constrained_layout=True)
    vmax = max(pc.max(t["utilization"]).as_py() or 0.0, 1e-9)
    data = {d: np.full((rows, cols), np.nan) for d in DIRECTIONS}
    for r, c, d, u in zip(*(t[n].to_pylist() for n in ("src_row", "src_col", "direction", "utilization"))):
        data[d][r, c] = u
    for ax, d in zip(axes.flat, DIRECTIONS):
        im = ax.imshow(data[d], vmin=0, vmax=vmax, cmap="viridis")
        ax.set_title(f"links leaving towards {d}")
        _grid_axes(ax, rows, cols)
    fig.colorbar(im, ax=axes, label="utilisation (flits/cycle)")
    if "offered_rate" in t.column_names and t.num_rows:
        fig.suptitle(f"link utilisation at offered load {top:g} flits/node/cycle (blank: no link there)")
    return fig


def mu_heatmap(tables: dict[str, pa.Table], plt):
    """Memory-unit utilisation on the grid (mean over time if the table is a time series)."""
    def usable(t):
        return first(t, ROW) and first(t, COL) and containing(t, "util") and "direction" not in t.column_names

    name, t = find_table(tables, usable)
    r, c = present(first(t, ROW), "row"), present(first(t, COL), "column")
    u = present(containing(t, "util", prefer=("peak", "mean")), "utilisation")
    grid: dict[tuple, list] = {}
    for rv, cv, uv in zip(t[r].to_pylist(), t[c].to_pylist(), t[u].to_pylist()):
        if uv is not None:
            grid.setdefault((rv, cv), []).append(uv)
    if not grid:
        raise Skip(f"{name} has no {u} values")
    if not any(v for vs in grid.values() for v in vs):
        raise Skip(f"{u} of {name} is 0 at every MU for the whole run (no data held in MUs to draw)")
    rows, cols = max(k[0] for k in grid) + 1, max(k[1] for k in grid) + 1
    data = np.full((rows, cols), np.nan)
    for (rv, cv), vs in grid.items():
        data[rv, cv] = sum(vs) / len(vs)
    fig, ax = plt.subplots(figsize=(6, 5), constrained_layout=True)
    im = ax.imshow(data, cmap="magma", vmin=0)
    fig.colorbar(im, ax=ax, shrink=0.6, label=f"{'mean ' if first(t, TIME) else ''}{_share(u)}")
    ax.set_title("memory-unit utilisation on the grid (blank: no MU)")
    _grid_axes(ax, rows, cols)
    return fig


def memory_over_time(tables: dict[str, pa.Table], plt, max_lines: int = 16):
    """Utilisation of each memory unit over simulated time, and the mean over units."""
    def usable(t):
        return first(t, TIME) and containing(t, "util") and numeric(t, first(t, TIME))

    name, t = find_table(tables, usable)
    x = present(first(t, TIME), "time")
    u = present(containing(t, "util", prefer=("mean", "used")), "utilisation")
    unit = first(t, UNIT)
    if not pc.max(pc.fill_null(t[u], 0)).as_py():
        raise Skip(f"{u} of {name} is 0 (or null) at every sample (no data held in MUs to draw)")
    fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    if unit:
        groups = grouped(t, x, u, unit)
        for i, (xs, ys, _, _) in enumerate(groups.values()):
            if i < max_lines:
                ax.plot(xs, ys, linewidth=0.7, alpha=0.5)
    xs, ys, lo, hi = next(iter(grouped(t, x, u).values()))
    ax.plot(xs, ys, color="black", linewidth=2, label="mean over units")
    ax.fill_between(xs, lo, hi, color="grey", alpha=0.2, label="min..max")
    ax.set_xlabel("simulated time (cycles)" if x in ("cycle", "cycles") else x)
    units.apply(ax, "x", "cycles")  # 2.1M, not a "1e6" beside the axis
    ax.set_ylabel(_share(u))
    ax.set_title("memory-unit utilisation over time")
    ax.legend(fontsize="small")
    return fig


def message_breakdown(tables: dict[str, pa.Table], plt):
    """Protocol messages by type: from a (type, count) table or a summary's messages_* columns."""
    counts: dict[str, float] = {}
    for t in tables.values():
        kind, n = first(t, ("message_type", "msg_type", "message", "type")), first(t, ("count", "messages"))
        if kind and n and numeric(t, n):
            for k, v in zip(t[kind].to_pylist(), t[n].to_pylist()):
                counts[str(k)] = counts.get(str(k), 0) + (v or 0)
        for c in t.column_names:
            if c.startswith(("messages_", "msg_")) and numeric(t, c) and not c.endswith("_total"):
                counts[c.split("_", 1)[1]] = counts.get(c.split("_", 1)[1], 0) + (pc.sum(t[c]).as_py() or 0)
        if counts:
            break
    if not counts:
        raise Skip("no table with message counts (message_type + count, or messages_* columns)")
    if not any(counts.values()):
        raise Skip("every message count is 0")
    fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    names = sorted(counts, key=lambda k: counts[k], reverse=True)
    ax.bar(names, [counts[k] for k in names])
    ax.set_ylabel("messages")
    units.apply(ax, "y", "")  # 12k, not 12000
    ax.set_title("protocol messages by type")
    ax.tick_params(axis="x", rotation=45)
    return fig


def energy_breakdown(tables: dict[str, pa.Table], plt):
    """A run's energy by component, each bar stacked by action (the run_energy table)."""
    _, t = find_table(tables, lambda t: {"component", "action", "joules"} <= set(t.column_names))
    comps = list(dict.fromkeys(t["component"].to_pylist()))
    if not any(t["joules"].to_pylist()):
        raise Skip("every energy is 0 J")
    fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    bottom = dict.fromkeys(comps, 0.0)
    for c, a, j in zip(*(t[n].to_pylist() for n in ("component", "action", "joules"))):
        if j:
            ax.bar(labels.component(c), j, bottom=bottom[c], label=f"{labels.component(c)}: {a.replace('_', ' ')}")
            bottom[c] += j
    ax.set_ylabel(f"energy ({units.apply(ax, 'y', 'J')})")
    ax.set_title(f"energy by component: {units.engineering(sum(bottom.values()), 'J')} in all")
    ax.tick_params(axis="x", rotation=30)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


TTFT_PARTS = (("queueing_seconds", "queueing (arrival to admission)"),
              ("prefill_seconds", "prefill (its prefill steps)"),
              ("interference_seconds", "interference (other requests' steps)"))


def ttft_breakdown(tables: dict[str, pa.Table], plt, most_bars: int = 64):
    """A serve run's TTFTs in three (run_requests): each request's queueing, prefill and
    interference stacked, by request up to ``most_bars`` requests, else by TTFT rank (an area)."""
    names = [c for c, _ in TTFT_PARTS]
    _, t = find_table(tables, lambda t: set(names) <= set(t.column_names))
    rows = [r for r in t.select(["request", *names]).to_pylist() if all(r[c] is not None for c in names)]
    if not rows:
        raise Skip("no request has a TTFT split into queueing, prefill and interference (a serve run's)")
    rows.sort(key=lambda r: r["request"])
    largest = max(sum(r[c] for c in names) for r in rows)
    factor, unit = units.scale(largest, "s")
    fig, ax = plt.subplots(figsize=(9, 4), constrained_layout=True)
    many = len(rows) > most_bars
    if many:  # by TTFT rank: the fastest request on the left
        rows.sort(key=lambda r: sum(r[c] for c in names))
    xs = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for i, (c, label) in enumerate(TTFT_PARTS):
        ys = np.array([r[c] for r in rows]) / factor
        if many:
            ax.fill_between(xs, bottom, bottom + ys, step="mid", color=f"C{i}", label=label, linewidth=0)
        else:
            ax.bar(xs, ys, 0.8, bottom=bottom, color=f"C{i}", label=label)
        bottom = bottom + ys
    total = sum(sum(r[c] for c in names) for r in rows)
    shares = ", ".join(f"{label.split(' ')[0]} {sum(r[c] for r in rows) / total:.0%}"
                       for c, label in TTFT_PARTS) if total else ""
    ax.set_xlabel("requests by TTFT (fastest first)" if many else "request")
    if not many:
        ax.set_xticks(xs[:: -(-len(rows) // 16)], [str(r["request"]) for r in rows][:: -(-len(rows) // 16)])
    ax.set_ylabel(f"time to first token ({unit})")
    ax.set_ylim(0, 1.05 * largest / factor)
    ax.set_title(f"TTFT breakdown of {len(rows)} requests" + (f"\n{shares} of all TTFT" if shares else ""),
                 fontsize="medium")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


RUN_FIGURES = {
    "latency_vs_load": latency_vs_load,
    "link_utilization": link_heatmap,
    "mu_utilization": mu_heatmap,
    "memory_over_time": memory_over_time,
    "messages": message_breakdown,
    "energy": energy_breakdown,
    "ttft_breakdown": ttft_breakdown,
}

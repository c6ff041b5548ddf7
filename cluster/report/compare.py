"""Two runs or two sweep slices side by side, metric by metric with their ratio: a paper's "policy A vs B".

A side is a results directory (``rdasim run/noc --out``, or a sweep's ``--out``) and, for a sweep,
the values its rows must have (a slice: ``memory_policy=virtual``). Its value of a metric is the
mean over its rows whose run completed (several seeds or runs: their mean, and the count said); a
run that deadlocked, was cut off or failed is never a value. The ratio is B / A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from cluster.errors import UserError
from cluster.report import labels, units
from cluster.report.data import numeric
from cluster.report.sources import discover
from cluster.report.style import wrap
from cluster.report.sweep_figures import NOT_METRICS, PREFERRED, SERVING
from cluster.sweep.outcomes import COMPLETED, row_outcome

RATIO_TICKS = (0.1, 0.2, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 5, 10, 20, 50, 100)
TITLE_SIZE = 8.3  # points
# drawn and printed by default (those either side has a value of), in this order
HEADLINE = tuple(dict.fromkeys((
    *SERVING, "e2e_p99_seconds", *PREFERRED, "mean_mu_utilization", "peak_mu_reserved", "hbm_read_bytes",
    "hbm_write_bytes", "energy_joules", "sim_seconds", "requests_failed", "preemptions", "wall_seconds")))


@dataclass(frozen=True)
class Side:
    """One side: what it is (for the printout), its completed rows, and how many rows were left out."""

    label: str
    rows: pa.Table
    left_out: int = 0  # rows whose run did not complete
    values: tuple[str, ...] = ()  # the slice's values (its file names)


@dataclass(frozen=True)
class Line:
    metric: str
    a: float | None
    b: float | None

    @property
    def ratio(self) -> float | None:
        """B / A; None when either is missing or A is 0 (B too: 1)."""
        if self.a is None or self.b is None:
            return None
        if self.a == 0:
            return 1.0 if self.b == 0 else None
        return self.b / self.a


@dataclass
class Comparison:
    a: Side
    b: Side
    lines: list[Line] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    def text(self) -> str:
        """The table printed: one line a metric, its label with units, A, B and B/A."""
        head = [f"A: {self.a.label}", f"B: {self.b.label}"]
        rows = [(_label(ln.metric), _value(ln.a, ln.metric), _value(ln.b, ln.metric),
                 "-" if ln.ratio is None else f"{ln.ratio:.3f}") for ln in self.lines]
        width = max([len(r[0]) for r in rows] + [6])
        cols = [max([len(r[i]) for r in rows] + [1]) for i in (1, 2)]
        out = head + [f"{'metric':<{width}}  {'A':>{cols[0]}}  {'B':>{cols[1]}}  {'B/A':>7}"]
        out += [f"{m:<{width}}  {a:>{cols[0]}}  {b:>{cols[1]}}  {r:>7}" for m, a, b, r in rows]
        return "\n".join(out)


def _label(metric: str) -> str:
    """The metric's short name; its unit only where the values do not carry it ('43.66 ms' carries s)."""
    text, unit = labels.metric_parts(metric)
    return text if units.prefixable(unit) else labels.metric(metric)


def _value(v: float | None, metric: str) -> str:
    if v is None:
        return "-"
    unit = labels.metric_parts(metric)[1]
    return units.engineering(v, unit) if units.prefixable(unit) and v else f"{v:.4g}"


def _where(pairs: list[str]) -> dict[str, str]:
    """'memory.policy=virtual' -> {'memory_policy': 'virtual'} (a swept key as written in a spec, or its column)."""
    out = {}
    for p in pairs:
        key, eq, value = p.partition("=")
        if not eq or not key.strip():
            raise UserError(f"{p!r}: expected AXIS=VALUE, e.g. memory.policy=virtual")
        out[key.strip().replace(".", "_").replace("[", "_").replace("]", "")] = value.strip()
    return out


def _matches(column: pa.ChunkedArray, value: str) -> pa.ChunkedArray:
    """Rows of ``column`` equal to ``value`` as typed on the command line (a number compared as a number)."""
    if numeric(pa.table({"c": column}), "c"):
        try:
            return pc.equal(column, float(value))
        except ValueError:
            raise UserError(f"{value!r} is not a number, and the column is numeric") from None
    if pa.types.is_boolean(column.type):
        return pc.equal(column, value.lower() in ("true", "1", "yes"))
    return pc.equal(column, value)


def side(path: str | Path, where: list[str] | None = None) -> Side:
    """A side's rows: the result rows of the one sweep at ``path`` (those with ``where``'s values), or the
    summary rows of the runs there. UserError when there is nothing, or more than one kind of thing."""
    sources = discover(path)
    conditions = _where(where or [])
    if len(sources.sweeps) > 1:
        raise UserError(f"{path}: {len(sources.sweeps)} sweeps ({', '.join(s.name for s in sources.sweeps)}); "
                        "give one sweep's directory")
    axes: list[str] = []
    if sources.sweeps:
        sweep = sources.sweeps[0]
        rows, label, axes = sweep.result, f"{path} (sweep {sweep.name})", sweep.axes
    else:
        summaries = [t for r in sources.runs for n, t in r.tables.items() if n.endswith("_summary")]
        if not summaries:
            raise UserError(f"{path}: no run or sweep results (rdasim run/noc --out, or rdasim sweep --out)")
        rows, label = pa.concat_tables(summaries, promote_options="permissive"), str(path)
    for key, value in conditions.items():
        if key not in rows.column_names:
            raise UserError(f"{path}: no column {key!r} to select {key}={value} by")
        rows = rows.filter(_matches(rows[key], value))
    if conditions:
        label += " where " + ", ".join(f"{k} = {v}" for k, v in conditions.items())
    if not rows.num_rows:
        raise UserError(f"{label}: no rows")
    done = [row_outcome(r) == COMPLETED for r in rows.select(
        [c for c in ("point_status", "status") if c in rows.column_names]).to_pylist()] if rows.num_columns else []
    kept = rows.filter(pa.array(done)) if done else rows
    if not kept.num_rows:
        raise UserError(f"{label}: none of its {rows.num_rows} runs completed: nothing to compare")
    if kept.num_rows > 1:
        pooled = [f"{a} {', '.join(map(str, sorted(vs, key=str)))}" for a in axes if a in kept.column_names
                  and len(vs := {v for v in kept[a].to_pylist() if v is not None}) > 1]
        label += f" (mean of {kept.num_rows} runs{': ' + '; '.join(pooled) if pooled else ''})"
    return Side(label, kept, rows.num_rows - kept.num_rows, tuple(conditions.values()))


def _mean(t: pa.Table, metric: str) -> float | None:
    if metric not in t.column_names or not numeric(t, metric):
        return None
    values = [float(v) for v in t[metric].to_pylist() if v is not None and math.isfinite(float(v))]
    return sum(values) / len(values) if values else None


def _metrics(a: Side, b: Side, asked: list[str] | None) -> list[str]:
    both = [c for c in a.rows.column_names if c in b.rows.column_names]
    if asked:
        missing = [m for m in asked if m not in both]
        if missing:
            raise UserError(f"no column {', '.join(missing)} on both sides")
        return asked
    numeric_cols = [c for c in both if numeric(a.rows, c) and numeric(b.rows, c) and c not in NOT_METRICS
                    and not c.endswith(("_seed", "_id")) and c != "seed"]
    valued = [c for c in numeric_cols if _mean(a.rows, c) or _mean(b.rows, c)]  # a value other than null and 0
    return [m for m in HEADLINE if m in valued] or valued


def compare(a: str | Path, b: str | Path | None = None, *, where_a: list[str] | None = None,
            where_b: list[str] | None = None, metrics: list[str] | None = None) -> Comparison:
    """The comparison of side A and side B (``b`` None: A's directory, for two slices of one sweep)."""
    left, right = side(a, where_a), side(a if b is None else b, where_b)
    return Comparison(left, right, [Line(m, _mean(left.rows, m), _mean(right.rows, m))
                                    for m in _metrics(left, right, metrics)])


def draw(comparison: Comparison, plt):
    """B / A of every metric with both values, as bars from 1 on a log axis (a ratio of 2 and of 1/2 equally long)."""
    drawn = [ln for ln in comparison.lines if ln.ratio is not None and ln.ratio > 0]
    if not drawn:
        raise UserError("no metric has a value on both sides: nothing to draw")
    fig, ax = plt.subplots(figsize=(7.5, 0.38 * len(drawn) + 1.9), layout="constrained")
    names = [labels.metric(ln.metric) for ln in drawn]
    ratios = [r for ln in drawn if (r := ln.ratio) is not None]
    ax.barh(range(len(drawn)), [r - 1 for r in ratios], left=1,  # not green and red: lower is better for some
            color=["C0" if r >= 1 else "C1" for r in ratios], edgecolor="black", linewidth=0.4)
    for i, r in enumerate(ratios):
        ax.text(r, i, f" {r:.3g} ", va="center", ha="left" if r >= 1 else "right", fontsize="small")
    ax.set_xscale("log")
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    spread = max(max(ratios), 1 / min(ratios), 1.1) ** 1.35
    ax.set_xticks([t for t in RATIO_TICKS if 1 / spread <= t <= spread])
    ax.set_xlim(1 / spread, spread)
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_yticks(range(len(drawn)), names, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("B / A")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(wrap([f"A: {comparison.a.label}", f"B: {comparison.b.label}"], fig.get_figwidth() * 72 * 0.95,
                      TITLE_SIZE), fontsize=TITLE_SIZE)
    return fig


def write(comparison: Comparison, out: Path, formats: tuple[str, ...] = ("png", "pdf")) -> list[Path]:
    """Draw the comparison into ``out``/compare.<format> (written whole or not at all)."""
    from cluster.report.render import PNG_DPI, pyplot
    from cluster.results import io

    plt = pyplot()
    fig = draw(comparison, plt)
    name = "compare-" + "-vs-".join(_slug(sd) for sd in (comparison.a, comparison.b))
    written = []
    for fmt in formats:
        target = Path(out) / f"{name}.{fmt}"
        target.parent.mkdir(parents=True, exist_ok=True)
        with io.atomic_path(target) as tmp:
            fig.savefig(tmp, format=fmt, dpi=PNG_DPI)
        written.append(target)
    plt.close(fig)
    comparison.written = written
    return written


def _slug(sd: Side) -> str:
    """A side in a file name: its slice's values, else its directory's name."""
    text = "-".join(sd.values) if sd.values else Path(sd.label.split(" (")[0]).name
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in text) or "results"

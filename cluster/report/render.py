"""Writing a report: every figure the tables allow, as PNG, PDF and SVG, and why the others were skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from cluster.errors import UserError
from cluster.report import explore_figures
from cluster.report import sweep_figures as sf
from cluster.report.data import Skip, numeric, only_ok
from cluster.report.figures import RUN_FIGURES
from cluster.report.sources import Sources, SweepTables, discover
from cluster.results import io


@dataclass(frozen=True)
class Options:
    x: list[str] = field(default_factory=list)  # sweep axes to plot against (default: every varied axis)
    y: list[str] = field(default_factory=list)  # metrics (default: a few headline ones)
    hue: str | None = None  # axis drawn as one line per value (default: a varied axis with few values)
    point: str | None = None  # sweep point whose own tables are drawn (default: the first finished one)


@dataclass
class Report:
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UserError("rdasim report draws with matplotlib, which is not installed: "
                        "pip install -e '.[report]' in the rdasim checkout") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


FORMATS = ("png", "pdf", "svg")  # a raster to look at, vectors for the paper


def _save(fig, path: Path, report: Report, plt) -> None:
    for fmt in FORMATS:
        target = path.with_suffix(f".{fmt}")
        with io.atomic_path(target) as tmp:
            fig.savefig(tmp, format=fmt, dpi=200 if fmt == "png" else None, bbox_inches="tight")
        report.written.append(target)
    plt.close(fig)


def _draw(name: str, make, path: Path, report: Report, plt) -> None:
    try:
        fig = make()
    except Skip as why:
        report.skipped.append(f"{name}: {why}")
        return
    _save(fig, path, report, plt)


def _point_tables(sweep: SweepTables, point: str | None) -> tuple[str, dict[str, pa.Table]]:
    ok = only_ok(sweep.result)
    if point is None:
        if not ok.num_rows:
            return "", {}
        point = ok.sort_by("point_index")["point_id"][0].as_py()
    tables = {"result": sweep.result, **sweep.tables}
    return point, {n: t.filter(pc.equal(t["point_id"], point)) for n, t in tables.items()
                   if "point_id" in t.column_names}


def _sweep(sweep: SweepTables, opts: Options, out: Path, report: Report, plt) -> None:
    axes = opts.x or sf.varied_axes(sweep)
    for x in axes:
        if sf.message_columns(sweep) and not numeric(sweep.result, x):
            _draw(f"{sweep.name} messages vs {x}", partial(sf.messages_vs_axis, sweep, x, plt),
                  out / f"{sweep.name}-messages-vs-{x}.png", report, plt)
        if sf.energy_columns(sweep) and not numeric(sweep.result, x):
            _draw(f"{sweep.name} energy vs {x}", partial(sf.energy_vs_axis, sweep, x, plt),
                  out / f"{sweep.name}-energy-vs-{x}.png", report, plt)
        for y in opts.y or sf.default_metrics(sweep):
            h = opts.hue if opts.hue and opts.hue != x else sf.hue_for(sweep, x)
            _draw(f"{sweep.name} {y} vs {x}", partial(sf.metric_vs_axis, sweep, x, y, h, plt),
                  out / f"{sweep.name}-{y}-vs-{x}.png", report, plt)
    point, tables = _point_tables(sweep, opts.point)
    for name, make in RUN_FIGURES.items():
        if name != "latency_vs_load":
            _draw(f"{sweep.name} point {point} {name}", partial(make, tables, plt),
                  out / f"{sweep.name}-point-{point}-{name}.png", report, plt)


def default_out(results: str | Path) -> Path:
    return Path(results) / "_figures"


def write_report(path: str | Path, out: str | Path | None = None, opts: Options = Options()) -> Report:
    sources: Sources = discover(path)
    if sources.empty():
        raise UserError(f"no rdasim results at {str(path)!r}: expected Parquet tables (rdasim noc/run --out) "
                        "or a sweep (rdasim sweep --out)")
    out = Path(out) if out else default_out(path)
    plt = pyplot()
    report = Report()
    if sources.runs:
        for name, make in RUN_FIGURES.items():
            _draw(name, partial(make, sources.runs, plt), out / f"{name}.png", report, plt)
    for sweep in sources.sweeps:
        _sweep(sweep, opts, out, report, plt)
    for name, figure in explore_figures.figures(path, plt):  # an rdasim explore --out DIR
        _draw(name, figure, out / f"{name}.png", report, plt)
    return report

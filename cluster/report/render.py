"""Writing a report: every figure the tables allow, as PNG, PDF and SVG, and why the others were skipped."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from cluster.errors import UserError
from cluster.report import explore_figures, labels
from cluster.report import sweep_figures as sf
from cluster.report.data import Skip, numeric, only_ok
from cluster.report.figures import RUN_FIGURES
from cluster.report.sources import Sources, SweepTables, discover
from cluster.report.style import Palette
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
    notes: list[str] = field(default_factory=list)  # what the user asked for that some sweeps cannot draw
    palette: Palette = field(default_factory=Palette)  # one colour per value across the report


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


def _draw(name: str, make, path: Path, report: Report, plt, caption: str = "") -> None:
    """Draw and save one figure; ``caption`` says which run or point it shows (above its own title)."""
    try:
        fig = make()
    except Skip as why:
        report.skipped.append(f"{name}: {why}")
        return
    if caption:
        own = fig._suptitle.get_text() if fig._suptitle is not None else ""
        fig.suptitle(f"{caption}\n{own}" if own else caption, fontsize="medium")
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


def _point_caption(sweep: SweepTables, point: str, result: pa.Table | None) -> str:
    """'noc-latency, point 1a2b...: noc.topology = mesh, noc.rate = 0.1 flits/node/cycle'."""
    row = result.to_pylist()[0] if result is not None and result.num_rows else {}
    shown = [labels.condition(sweep.command, a, row[a]) for a in sweep.axes if a in row]
    return f"{sweep.name}, point {point}" + (f": {', '.join(shown)}" if shown else "")


def _sweep(sweep: SweepTables, opts: Options, out: Path, report: Report, plt) -> None:
    columns = set(sweep.result.column_names)
    axes = [x for x in opts.x if x in columns] if opts.x else sf.default_axes(sweep)
    for x in axes:
        categorical = not numeric(sweep.result, x)
        if sf.message_columns(sweep) and categorical:
            _draw(f"{sweep.name} messages vs {x}",
                  partial(sf.messages_vs_axis, sweep, x, plt, palette=report.palette),
                  out / f"{sweep.name}-messages-vs-{x}.png", report, plt)
        if sf.energy_columns(sweep) and categorical:
            _draw(f"{sweep.name} energy vs {x}", partial(sf.energy_vs_axis, sweep, x, plt, palette=report.palette),
                  out / f"{sweep.name}-energy-vs-{x}.png", report, plt)
        for y in opts.y or sf.default_metrics(sweep):
            h = opts.hue if opts.hue and opts.hue != x else sf.hue_for(sweep, x)
            _draw(f"{sweep.name} {y} vs {x}", partial(sf.metric_vs_axis, sweep, x, y, h, plt,
                                                       palette=report.palette, explicit=bool(opts.y)),
                  out / f"{sweep.name}-{y}-vs-{x}.png", report, plt)
    point, tables = _point_tables(sweep, opts.point)
    caption = _point_caption(sweep, point, tables.get("result"))
    for name, make in RUN_FIGURES.items():
        if name != "latency_vs_load":
            _draw(f"{sweep.name} point {point} {name}", partial(make, tables, plt),
                  out / f"{sweep.name}-point-{point}-{name}.png", report, plt, caption)


def _missing(sweeps: list[SweepTables], opts: Options) -> tuple[list[SweepTables], list[str]]:
    """The sweeps that have the columns --x (one at least), --y and --hue name, and one line per column
    that some sweeps lack, naming them. None has it: a UserError (exit 2) listing what they have."""
    asked = [("--x", c) for c in opts.x] + [("--y", c) for c in opts.y] + ([("--hue", opts.hue)] if opts.hue else [])
    lacking = {c: [s.name for s in sweeps if c not in s.result.column_names] for _, c in asked}
    drawable = [s for s in sweeps if (not opts.x or any(c in s.result.column_names for c in opts.x))
                and all(c in s.result.column_names for c in opts.y + ([opts.hue] if opts.hue else []))]
    if sweeps and not drawable:
        absent = ", ".join(f"{flag} {c}" for flag, c in asked if lacking[c])
        raise UserError(f"{absent}: no sweep here has {'it' if absent.count(',') == 0 else 'them all'} "
                        f"(sweeps: {', '.join(s.name for s in sweeps)}); `rdasim sweep status` and the manifests' "
                        "\"columns\" list the swept axes")
    by_sweeps: dict[tuple, list[str]] = {}  # the columns the same sweeps lack: one line
    for flag, c in asked:
        if lacking[c]:
            by_sweeps.setdefault(tuple(lacking[c]), []).append(f"{flag} {c}")
    notes = [f"{', '.join(cols)}: not in sweep{'s' if len(names) > 1 else ''} {', '.join(names)}; "
             f"drawn for {', '.join(s.name for s in drawable)}" for names, cols in by_sweeps.items()]
    return drawable, notes


def default_out(results: str | Path) -> Path:
    return Path(results) / "_figures"


def write_report(path: str | Path, out: str | Path | None = None, opts: Options = Options()) -> Report:
    sources: Sources = discover(path)
    if sources.empty():
        raise UserError(f"no rdasim results at {str(path)!r}: expected Parquet tables (rdasim noc/run --out) "
                        "or a sweep (rdasim sweep --out)")
    sweeps, notes = _missing(sources.sweeps, opts)
    out = Path(out) if out else default_out(path)
    plt = pyplot()
    report = Report(notes=notes)
    for run in sources.runs:
        prefix = f"{run.label}-" if run.label else ""
        for name, make in RUN_FIGURES.items():
            _draw(f"{prefix}{name}", partial(make, run.tables, plt), out / f"{prefix}{name}.png", report, plt,
                  run.where)
    for sweep in sweeps:
        _sweep(sweep, opts, out, report, plt)
    for name, figure in explore_figures.figures(path, plt):  # an rdasim explore --out DIR
        _draw(name, figure, out / f"{name}.png", report, plt)
    return report

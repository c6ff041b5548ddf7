"""Writing a report: the figures the tables allow (or those asked for), as PNG, PDF and SVG, in parallel.

The figures are planned first (one ``Job`` each), every series value is given its colour
(so figures drawn in separate processes agree), then the jobs run on up to one process per
core (forked: the tables are not copied). Each figure is laid out once and saved in every
format from that layout. What could not be drawn is listed once, in ``skipped.txt``.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc

from cluster.errors import UserError
from cluster.report import explore_figures, labels
from cluster.report import sweep_figures as sf
from cluster.report.cells import in_order
from cluster.report.data import Skip, distinct, numeric, only_ok
from cluster.report.figures import RUN_FIGURES
from cluster.report.sources import Sources, SweepTables, discover
from cluster.report.style import Palette, wrap
from cluster.results import io
from cluster.sweep.outcomes import COMPLETED, row_outcome

SKIPPED_FILE = "skipped.txt"
PNG_DPI = 150
CAPTION_SIZE = 10.0  # points: matplotlib's "medium"


@dataclass(frozen=True)
class Options:
    x: list[str] = field(default_factory=list)  # sweep axes to plot against (default: every varied axis)
    y: list[str] = field(default_factory=list)  # metrics (default: a few headline ones)
    hue: str | None = None  # axis drawn as one line per value (default: a varied axis with few values)
    point: str | None = None  # sweep point whose own tables are drawn (default: the first finished one)
    formats: tuple[str, ...] = ("png", "pdf")  # files of each figure: a raster to look at, a vector for the paper

    @property
    def chosen(self) -> bool:
        """The user named what to draw: only that is drawn (no per-point figures unless --point)."""
        return bool(self.x or self.y or self.hue)


@dataclass
class Report:
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the user asked for that some sweeps cannot draw
    palette: Palette = field(default_factory=Palette)  # one colour per value across the report
    figures: int = 0  # figures drawn
    seconds: float = 0.0
    skipped_file: Path | None = None  # where the skipped figures are listed

    def line(self, out: Path) -> str:
        """The one line a report prints on stderr."""
        kinds = ", ".join(sorted({p.suffix[1:].upper() for p in self.written}))
        text = f"report: {self.figures} figure{'s' if self.figures != 1 else ''} ({kinds or 'no files'}) in {out} " \
               f"in {self.seconds:.1f} s"
        if self.skipped:
            text += f"; {len(self.skipped)} skipped, listed in {self.skipped_file}"
        return text


@dataclass(frozen=True)
class Job:
    """One figure to draw: ``make(plt)`` returns it or raises Skip; ``caption`` goes above its own title."""

    name: str
    path: Path
    make: Callable
    caption: str = ""


def pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UserError("rdasim report draws with matplotlib, which is not installed: "
                        "pip install -e '.[report]' in the rdasim checkout") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


FORMATS = ("png", "pdf", "svg")  # what a figure can be written as


def _save(fig, path: Path, plt, formats: tuple[str, ...]) -> list[Path]:
    """Lay the figure out and rasterise it once (the PNG is that raster), then write the vector formats from
    that layout."""
    written = []
    fig.set_dpi(PNG_DPI)
    fig.canvas.draw()  # constrained layout, and the raster at the PNG's resolution
    fig.set_layout_engine("none")  # the vector formats keep these positions: no second layout
    for fmt in formats:
        target = path.with_suffix(f".{fmt}")
        with io.atomic_path(target) as tmp:
            if fmt == "png":
                _raster(fig, tmp)
            else:
                fig.savefig(tmp, format=fmt)
        written.append(target)
    plt.close(fig)
    return written


def _raster(fig, target: Path) -> None:
    """The PNG of the raster the canvas already drew (savefig would draw it again)."""
    from PIL import Image

    width, height = fig.canvas.get_width_height(physical=True)
    image = Image.frombuffer("RGBA", (width, height), fig.canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    image.save(target, format="png", dpi=(PNG_DPI, PNG_DPI), compress_level=1)  # level 6 took longer than drawing


def _render(job: Job, plt, formats: tuple[str, ...]) -> tuple[list[Path], str | None, str | None]:
    """(files written, why it was skipped, a traceback if drawing it failed)."""
    try:
        fig = job.make(plt)
    except Skip as why:
        return [], f"{job.name}: {why}", None
    except Exception:  # noqa: BLE001 - reported by the parent with the figure's name
        return [], None, traceback.format_exc()
    if job.caption:  # wrapped to the figure's width: a point's caption lists every swept value
        own = fig._suptitle.get_text() if fig._suptitle is not None else ""
        caption = wrap([job.caption], fig.get_figwidth() * 72 * 0.95, CAPTION_SIZE)
        fig.suptitle(f"{caption}\n{own}" if own else caption, fontsize=CAPTION_SIZE)
    try:
        return _save(fig, job.path, plt, formats), None, None
    except Exception:  # noqa: BLE001
        plt.close(fig)
        return [], None, traceback.format_exc()


def _worker(jobs: list[Job], formats: tuple[str, ...], todo, done) -> None:
    plt = pyplot()
    while (i := todo.get()) is not None:
        done.put((i, _render(jobs[i], plt, formats)))


def _run(jobs: list[Job], workers: int, plt, formats: tuple[str, ...]
         ) -> list[tuple[list[Path], str | None, str | None]]:
    """Every job's result, in order: here, or on ``workers`` forked processes taking jobs as they free."""
    workers = min(workers, len(jobs))
    if workers <= 1:
        return [_render(job, plt, formats) for job in jobs]
    import multiprocessing as mp

    ctx = mp.get_context("fork")  # the workers inherit the tables and the plan: nothing is pickled but results
    todo, done = ctx.Queue(), ctx.Queue()
    for i in sorted(range(len(jobs)), key=lambda i: -_weight(jobs[i])):  # the heaviest first: no long tail
        todo.put(i)
    for _ in range(workers):
        todo.put(None)
    procs = [ctx.Process(target=_worker, args=(jobs, formats, todo, done), daemon=True) for _ in range(workers)]
    for p in procs:
        p.start()
    results: dict = {}
    try:
        while len(results) < len(jobs):
            if not any(p.is_alive() for p in procs) and done.empty():
                raise RuntimeError("the report's drawing processes died before finishing")
            try:
                i, result = done.get(timeout=1.0)
            except Exception:  # noqa: BLE001 - queue.Empty: check the workers again
                continue
            results[i] = result
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    return [results[i] for i in range(len(jobs))]


def _weight(job: Job) -> int:
    """A job's rough cost for scheduling: sweep figures have panels, a point's figures one axes."""
    return 2 if "-point-" not in job.path.name else 1


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _point(sweep: SweepTables, point: str | None) -> str | None:
    """The point whose own tables are drawn: ``point``, else the first whose run completed (else the first
    stored ok; None without one)."""
    if point is not None:
        return point
    ok = only_ok(sweep.result)
    if not ok.num_rows:
        return None
    rows = ok.sort_by("point_index").select(["point_id"] + (["status"] if "status" in ok.column_names else []))
    first = next((r for r in rows.to_pylist() if row_outcome({"point_status": "ok", **r}) == COMPLETED),
                 rows.slice(0, 1).to_pylist()[0])
    return first["point_id"]


def _point_caption(sweep: SweepTables, point: str, result: pa.Table | None) -> str:
    """'noc-latency, point 1a2b...: noc.topology = mesh, noc.rate = 0.1 flits/node/cycle'."""
    row = result.to_pylist()[0] if result is not None and result.num_rows else {}
    shown = [labels.condition(sweep.command, a, row[a]) for a in sweep.axes if a in row]
    return f"{sweep.name}, point {point}" + (f": {', '.join(shown)}" if shown else "")


def _colours(sweep: SweepTables, palette: Palette) -> None:
    """Give every value of every swept axis, and every energy component, its colour before any figure is drawn."""
    for a in sweep.axes:
        if a in sweep.result.column_names:
            palette.register(a, in_order(distinct(sweep.result, a), sweep.orders.get(a)))
    palette.register("component", [labels.energy_component(c) for c in sf.energy_columns(sweep)])
    palette.register("message type", [labels.message_type(c) for c in sf.message_columns(sweep)])


def _sweep_jobs(sweep: SweepTables, opts: Options, out: Path, palette: Palette) -> list[Job]:
    columns = set(sweep.result.column_names)
    axes = [x for x in opts.x if x in columns] if opts.x else sf.default_axes(sweep)
    categorical_axes = [x for x in axes if not numeric(sweep.result, x)]
    jobs = []
    for x in axes:
        categorical = x in categorical_axes
        # --y names the metrics: only those; by default the breakdowns against the first categorical axis only
        if not opts.y and categorical and (opts.x or x == categorical_axes[0]):
            if sf.message_columns(sweep):
                jobs.append(Job(f"{sweep.name} messages vs {x}", out / f"{sweep.name}-messages-vs-{x}.png",
                                partial(sf.messages_vs_axis, sweep, x, palette=palette)))
            if sf.energy_columns(sweep):
                jobs.append(Job(f"{sweep.name} energy vs {x}", out / f"{sweep.name}-energy-vs-{x}.png",
                                partial(sf.energy_vs_axis, sweep, x, palette=palette)))
        for y in opts.y or sf.default_metrics(sweep):
            h = opts.hue if opts.hue and opts.hue != x else sf.hue_for(sweep, x)
            jobs.append(Job(f"{sweep.name} {y} vs {x}", out / f"{sweep.name}-{y}-vs-{x}.png",
                            _Metric(sweep, x, y, h, palette, bool(opts.y))))
    if opts.chosen and opts.point is None:
        return jobs
    point = _point(sweep, opts.point)
    if point is None:
        return jobs
    caption = _point_caption(sweep, point, sweep.result.filter(pc.equal(sweep.result["point_id"], point)))
    for name, make in RUN_FIGURES.items():
        if name != "latency_vs_load":
            jobs.append(Job(f"{sweep.name} point {point} {name}", out / f"{sweep.name}-point-{point}-{name}.png",
                            partial(_point_figure, make, sweep, point), caption))
    return jobs


def _point_figure(make, sweep: SweepTables, point: str, plt):
    """A run figure of one point, its tables read where it is drawn (in the worker, not before forking)."""
    return make({"result": sweep.result.filter(pc.equal(sweep.result["point_id"], point)),
                 **sweep.point_tables(point)}, plt)


@dataclass(frozen=True)
class _Metric:
    """``metric_vs_axis`` with its arguments, called with pyplot (its plt comes after the columns)."""

    sweep: SweepTables
    x: str
    y: str
    hue: str | None
    palette: Palette
    explicit: bool

    def __call__(self, plt):
        return sf.metric_vs_axis(self.sweep, self.x, self.y, self.hue, plt, palette=self.palette,
                                 explicit=self.explicit)


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


def plan(path: str | Path, out: Path, opts: Options, sources: Sources, palette: Palette) -> tuple[list[Job], list[str]]:
    """Every figure to draw for the results at ``path``, and the notes on what was asked and is missing."""
    sweeps, notes = _missing(sources.sweeps, opts)
    jobs = []
    for run in sources.runs:
        prefix = f"{run.label}-" if run.label else ""
        jobs += [Job(f"{prefix}{name}", out / f"{prefix}{name}.png", partial(make, run.tables), run.where)
                 for name, make in RUN_FIGURES.items()]
    for sweep in sweeps:
        _colours(sweep, palette)
    explored = explore_figures.figures(path)
    for sweep in sweeps:  # an exploration's trials are drawn as a sweep only when asked (--x, --y, --hue)
        if not (explored and sweep.explore and not opts.chosen):
            jobs += _sweep_jobs(sweep, opts, out, palette)
    jobs += [Job(name, out / f"{name}.png", make) for name, make in explored]
    return jobs, notes


def write_report(path: str | Path, out: str | Path | None = None, opts: Options = Options(),
                 workers: int | None = None) -> Report:
    """Draw the report of the results at ``path`` into ``out``, on ``workers`` processes (default: one a core)."""
    start = time.perf_counter()
    sources: Sources = discover(path)
    if sources.empty():
        raise UserError(f"no rdasim results at {str(path)!r}: expected Parquet tables (rdasim noc/run --out) "
                        "or a sweep (rdasim sweep --out)")
    out = Path(out) if out else default_out(path)
    plt = pyplot()
    report = Report()
    jobs, report.notes = plan(path, out, opts, sources, report.palette)
    for job, (written, skipped, failure) in zip(jobs, _run(jobs, workers or cores(), plt, opts.formats)):
        if failure is not None:
            raise RuntimeError(f"drawing {job.name} failed:\n{failure}")
        report.written += written
        report.figures += bool(written)
        if skipped:
            report.skipped.append(skipped)
    if report.skipped:
        report.skipped_file = out / SKIPPED_FILE
        io.write_text("".join(f"skipped {why}\n" for why in report.skipped), report.skipped_file)
    else:
        (out / SKIPPED_FILE).unlink(missing_ok=True)  # an earlier report's list would no longer be true
    report.seconds = time.perf_counter() - start
    return report

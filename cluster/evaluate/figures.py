"""Each study's figure, drawn with matplotlib (Agg) and written as PNG next to evaluation.md."""

from __future__ import annotations

from pathlib import Path

from cluster.evaluate.run import StudyRun
from cluster.results.io import atomic_path

DPI = 150


def draw(run: StudyRun, figures: Path) -> Path | None:
    """The study's figure as figures/<sweep>.png; None when it has no rows to draw."""
    if not run.rows:
        return None
    from cluster.report.render import pyplot

    plt = pyplot()
    fig = run.study.draw(run.rows, plt)
    target = figures / f"{run.sweep}.png"
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    plt.close(fig)
    return target

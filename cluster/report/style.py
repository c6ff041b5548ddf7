"""What a report keeps the same across its figures, and what keeps its text readable.

A value (``noc_topology = torus``, ``memory_policy = virtual``, an energy component) gets
the next free colour the first time any figure of the report draws it, and keeps it in
every later panel and figure, so a reader never has to re-learn a legend. Each report
makes its own Palette: nothing is remembered between reports. A run that gave no value is
drawn as a gap mark whose shape says why (deadlocked, cut off, failed, error row).
Titles wrap to their panel's width and category ticks turn only when they would touch.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from cluster.report.cells import NO_VALUE
from cluster.sweep.outcomes import CUT_OFF, DEADLOCKED, ERROR, FAILED, WORDS

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
LINES = ("-", "--", "-.", ":")
SHARED_RANGE = 10.0  # panels share a y axis only when their largest values are within this factor
GAP_MARKERS = {DEADLOCKED: "X", CUT_OFF: ">", FAILED: "P", ERROR: "*", NO_VALUE: "o"}  # a run that gave no value
GAP_Y = 0.045  # gap marks sit this far up the panel (axes fraction), on the baseline
TICK_SIZE = 10.0  # points: matplotlib's default tick labels
POINTS_PER_CHAR = 0.58  # the width of a character in points per point of font size (DejaVu Sans, mean)


def gap_label(outcome: str) -> str:
    """The legend entry of a gap mark: 'deadlocked: no value'."""
    return f"{WORDS.get(outcome, outcome).removesuffix(' rows')}: no value"


@dataclass
class Palette:
    seen: dict[str, list] = field(default_factory=dict)  # column -> its values in the order they got colours

    def register(self, column: str, values) -> None:
        """Give ``values`` (in this order) their colours now, so the first panel drawn does not decide them."""
        known = self.seen.setdefault(column, [])
        known += [v for v in values if v not in known]

    def index(self, column: str, value) -> int:
        self.register(column, [value])
        return self.seen[column].index(value)

    def color(self, column: str, value) -> str:
        return f"C{self.index(column, value) % 10}"

    def marker(self, column: str, value) -> str:
        return MARKERS[self.index(column, value) % len(MARKERS)]

    def line(self, column: str, value) -> str:
        return LINES[self.index(column, value) % len(LINES)]


def share_y(panel_peaks: list[float]) -> bool:
    """Whether panels whose largest |y| are these should share one y axis (not when they differ ~10x or more)."""
    peaks = [abs(p) for p in panel_peaks if p]
    return not peaks or max(peaks) < SHARED_RANGE * min(peaks)


def text_width(text: str, fontsize: float) -> float:
    """Estimated width of one line of ``text`` in points."""
    return len(text) * fontsize * POINTS_PER_CHAR


def wrap(lines: list[str], width_points: float, fontsize: float) -> str:
    """``lines`` (one per condition) each wrapped to ``width_points``."""
    chars = max(12, int(width_points / (fontsize * POINTS_PER_CHAR)))
    return "\n".join(part for line in lines for part in textwrap.wrap(line, chars, break_on_hyphens=False) or [""])


def fit_categories(ax, labels: list[str], width_points: float, fontsize: float) -> None:
    """Category tick labels, turned 30 degrees only when side by side they would touch."""
    slot = width_points / max(len(labels), 1)
    widest = max((text_width(t, fontsize) for t in labels), default=0.0)
    ax.set_xticks(range(len(labels)), labels)
    half = max(len(labels), 2.2) / 2  # a lone category keeps a bar's width, not the panel's
    ax.set_xlim((len(labels) - 1) / 2 - half, (len(labels) - 1) / 2 + half)
    if widest > slot:
        ax.tick_params(axis="x", labelrotation=30)
        for t in ax.get_xticklabels():
            t.set_horizontalalignment("right")
            t.set_rotation_mode("anchor")

"""What a report keeps the same across its figures: one colour and marker per value, and when panels share a scale.

A value (``noc_topology = torus``, ``memory_policy = virtual``, an energy component) gets
the next free colour the first time any figure of the report draws it, and keeps it in
every later panel and figure, so a reader never has to re-learn a legend. Each report
makes its own Palette: nothing is remembered between reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
LINES = ("-", "--", "-.", ":")
SHARED_RANGE = 10.0  # panels share a y axis only when their largest values are within this factor


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

"""A sweep's rows arranged as a figure draws them: panels (one per combination of the other varied axes
the sweep has), series (one per hue value) and cells (one per x value), each cell holding the values of
the runs that completed and the outcomes of those that did not.

A run that did not complete (deadlocked, cut off, failed, an error row) never gives a cell a value:
a cell with no completed run is a gap, drawn as a mark saying why; a cell with some completed seeds
is the mean of those, marked. Only combinations the sweep has become panels, and a panel shows only
the x values its rows have.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from scipy.special import stdtrit

from cluster.sweep.outcomes import COMPLETED, OUTCOMES, row_outcome

NO_VALUE = "no value"  # a completed run whose metric is null (e.g. energy per token with no token)
MIN_INTERVAL_SEEDS = 3  # fewer: the seeds' values are drawn, not an interval (Student's t at 1 degree of
# freedom is 12.7: two seeds' interval is wider than the spread of any two values and runs below zero)


def sort_key(v):
    return (isinstance(v, str), v) if not isinstance(v, bool) else (False, int(v))


def in_order(values, order: list | None) -> list:
    """``values`` in the spec's ``order`` (others after it, sorted)."""
    order = list(order or [])
    return sorted(values, key=lambda v: (order.index(v) if v in order else len(order), sort_key(v)))


def ci95(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95 % confidence interval of the mean; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(stdtrit(n - 1, 0.975)) * sd / math.sqrt(n)  # Student's t (scipy.special: no scipy.stats)


def _number(v) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


@dataclass
class Cell:
    """The runs of one (panel, hue value, x value): the completed ones' values, every run's outcome."""

    values: list[float] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    saturated: bool = False  # a NoC load whose packets did not drain (a value still: latency past saturation)

    def add(self, row: dict, y: str | None) -> None:
        outcome = row_outcome(row)
        v = _number(row.get(y)) if y else None
        if outcome == COMPLETED and y and v is None:
            outcome = NO_VALUE
        self.outcomes[outcome] += 1
        if outcome == COMPLETED and v is not None:
            self.values.append(v)
            self.saturated |= bool(row.get("saturated"))

    @property
    def gap(self) -> str | None:
        """Why the cell has no value (its most frequent outcome that is not completed), or None."""
        if self.values:
            return None
        rest = [(n, -OUTCOMES.index(k) if k in OUTCOMES else 0, k) for k, n in self.outcomes.items()]
        return max(rest)[2] if rest else NO_VALUE

    @property
    def partial(self) -> bool:
        """Some of its runs gave the value, others did not complete (left out of the mean)."""
        return bool(self.values) and sum(self.outcomes.values()) > len(self.values)

    @property
    def mean(self) -> float:
        return ci95(self.values)[0]

    @property
    def error(self) -> float:
        """Half-width of the 95 % interval, drawn as an error bar; 0 below MIN_INTERVAL_SEEDS values."""
        return ci95(self.values)[1] if len(self.values) >= MIN_INTERVAL_SEEDS else 0.0

    @property
    def shown_values(self) -> list[float]:
        """The values drawn one by one beside the mean: 2 seeds (too few for an interval) that differ."""
        few = 1 < len(self.values) < MIN_INTERVAL_SEEDS and max(self.values) != min(self.values)
        return list(self.values) if few else []


@dataclass
class Series:
    hue: object  # the hue value (None: no hue)
    cells: dict  # x value -> Cell

    def values(self) -> dict:
        """x -> mean, for the cells that have a value."""
        return {x: c.mean for x, c in self.cells.items() if c.values}


@dataclass
class Panel:
    where: dict  # facet column -> its value in this panel
    xs: list  # the x values this panel's rows have, in the spec's order
    series: list[Series]  # in the hue's spec order


def facet_rows(rows: list[dict], facets: list[str], orders: dict) -> list[tuple[dict, list[dict]]]:
    """One (fixed values, rows) per combination of the facets' values that the rows have, in the spec's order."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(tuple(r.get(f) for f in facets), []).append(r)

    def key(k):
        return [(orders.get(f, []).index(v) if v in orders.get(f, []) else len(orders.get(f, [])), sort_key(v))
                for f, v in zip(facets, k)]

    return [(dict(zip(facets, k)), groups[k]) for k in sorted(groups, key=key)]


def panels(rows: list[dict], x: str, y: str | None, hue: str | None, facets: list[str],
           orders: dict) -> list[Panel]:
    """The panels of a figure of ``y`` against ``x`` (one series per ``hue`` value)."""
    out = []
    for where, prows in facet_rows(rows, facets, orders):
        grid: dict = {}
        for r in prows:
            if r.get(x) is None:
                continue
            grid.setdefault(r.get(hue) if hue else None, {}).setdefault(r[x], Cell()).add(r, y)
        if not grid:
            continue
        xs = in_order({v for cells in grid.values() for v in cells}, orders.get(x))
        hues = in_order(grid, orders.get(hue)) if hue else [None]
        series = [Series(h, {v: grid[h][v] for v in in_order(grid[h], orders.get(x))}) for h in hues]
        out.append(Panel(where, xs, series))
    return out


def seed_statement(figure: list[Panel], seeded: bool, bars: bool = True) -> str:
    """What a value and its error bar are, true of this figure: '1 seed per point', 'seeds identical: 2 per
    point gave the same value', 'mean of 2 seeds; error bars: 95 % CI'. ``seeded``: the sweep varies a
    seed; ``bars``: the figure draws error bars."""
    cells = [c for p in figure for s in p.series for c in s.cells.values() if c.values]
    counts = sorted({len(c.values) for c in cells})
    if not counts or counts[-1] == 1:
        return "1 seed per point" if seeded else "one run per point"
    n = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    if all(max(c.values) == min(c.values) for c in cells):
        return f"seeds identical: {n} per point gave the same value" + (" (no error bars)" if bars else "")
    if not bars:
        return f"mean of {n} seeds per point"
    if counts[-1] < MIN_INTERVAL_SEEDS:
        return f"mean of {n} seeds per point; dots: each seed (fewer than {MIN_INTERVAL_SEEDS}: no interval)"
    if counts[0] < MIN_INTERVAL_SEEDS:
        return (f"mean of {n} seeds per point; error bars: 95 % confidence interval (Student's t) where "
                f"{MIN_INTERVAL_SEEDS} or more, dots: each seed where fewer")
    return f"mean of {n} seeds per point; error bars: 95 % confidence interval (Student's t)"


def same_as(figure: list[Panel]) -> dict:
    """hue value -> the earlier hue value whose series it equals in every panel where both are drawn."""
    out: dict = {}
    hues = [s.hue for s in figure[0].series] if figure else []
    for p in figure[1:]:
        hues += [s.hue for s in p.series if s.hue not in hues]
    for i, b in enumerate(hues):
        for a in hues[:i]:
            if a in out:
                continue
            pairs = [(sa, sb) for p in figure for sa in p.series for sb in p.series if sa.hue == a and sb.hue == b]
            if pairs and all(sa.values() == sb.values() and sa.values() for sa, sb in pairs):
                out[b] = a
                break
    return out

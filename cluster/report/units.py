"""Engineering prefixes for figures, as the field writes them: 5e-05 J is "50 µJ", 2.5e+10 B/s is "25 GB/s".

SI units take their prefix in the label (seconds, joules, bytes, bytes/s, hertz, watts, FLOP/s):
an axis picks one prefix for the largest value it shows and scales every tick by it. Other
quantities (cycles, tokens/s, messages) keep their unit and write large ticks as engineering
numbers: 175,000 tokens/s is "175k", 2,400,000 cycles "2.4M". Shares and small counts stay plain.
Ticks never carry an offset or a "1e-6" multiplier: the label says the unit.
"""

from __future__ import annotations

import math
from functools import cache

MICRO = "\u00b5"  # the micro sign, as printed
PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, MICRO), (1e-9, "n"),
            (1e-12, "p"))
SI_UNITS = ("s", "J", "W", "B", "B/s", "Hz", "FLOP/s", "FLOP")
COUNT_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))  # large counts: 175k, 2.4M


def prefixable(unit: str | None) -> bool:
    return bool(unit) and unit in SI_UNITS


def scale(largest: float, unit: str | None) -> tuple[float, str]:
    """(factor, prefixed unit) for values up to ``largest`` in ``unit``: (1e-6, 'µJ') for 5e-05 J."""
    if not prefixable(unit) or not largest or not math.isfinite(largest):
        return 1.0, unit or ""
    for factor, prefix in PREFIXES:
        if abs(largest) >= factor * 0.9995:  # 999.7 m rounds up to 1 (k), not to "1e+03 m"
            return factor, f"{prefix}{unit}"
    return PREFIXES[-1][0], f"{PREFIXES[-1][1]}{unit}"


def number(v: float) -> str:
    """A scaled number: at most 4 significant digits, no exponent for what a prefix already scaled."""
    text = f"{v:.4g}"
    return text if "e" not in text else f"{v:.3e}"


def _decimals(x: float, most: int = 3) -> int:
    """The fewest decimals (at most ``most``) that write ``x`` exactly: 2.5 -> 1, 20 -> 0."""
    return next((d for d in range(most + 1) if abs(round(x, d) - x) <= 1e-9 * max(abs(x), 1.0)), most)


def count(v: float, step: float = 0.0) -> str:
    """A plain number as a tick shows it: '175k', '2.4M', '12', '0.25'. ``step``: the spacing of the
    ticks, so neighbours never round to the same text ('7.5k', not '8k' beside '10k'); none: a value on its
    own, to 4 significant digits ('426.2k')."""
    if v == 0:
        return "0"
    for factor, suffix in COUNT_SUFFIXES:
        if abs(v) >= factor * 0.9995:
            if step <= 0:  # a value on its own: 4 significant digits
                return f"{v / factor:.4g}{suffix}"
            return f"{v / factor:.{max(_decimals(step / factor), _decimals(v / factor))}f}{suffix}"
    return f"{v:.4g}"


def engineering(v, unit: str | None) -> str:
    """One value with its unit: '25 GB/s', '50 µJ', '0.1 flits/node/cycle', '16'."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v} {unit}" if unit else str(v)
    factor, shown = scale(float(v), unit)
    text = number(v / factor) if prefixable(unit) else f"{v:g}"
    return f"{text} {shown}" if shown else text


def apply(ax, which: str, unit: str | None, largest: float | None = None) -> str:
    """Format the ticks of ``ax``'s x or y axis for ``unit``; return the unit its label shows (prefixed).
    ``largest``: the largest |value| the figure shows on this quantity (one prefix for all its panels;
    default: this axis's limits)."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    if axis.get_scale() != "linear":
        return unit or ""
    if largest is None:
        lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
        largest = max(abs(lo), abs(hi))
    scaled, counts = _formatters()
    if prefixable(unit):
        factor, shown = scale(largest, unit)
        axis.set_major_formatter(scaled(factor))
        return shown
    axis.set_major_formatter(counts())
    return unit or ""


@cache
def _formatters():
    """The tick formatters (matplotlib is imported only when a figure is drawn)."""
    from matplotlib.ticker import Formatter

    class Scaled(Formatter):
        """Ticks divided by the axis's prefix: 5e-05 J on a µJ axis is '50'."""

        def __init__(self, factor: float):
            self.factor = factor

        def __call__(self, v, pos=None):
            return number(v / self.factor) if v else "0"

    class Counts(Formatter):
        """Large plain numbers as engineering counts ('175k') when the axis reaches 10,000 (below, '800',
        '1000'), told the ticks once per draw."""

        step, big = 0.0, False

        def set_locs(self, locs):
            super().set_locs(locs)
            self.step = min((abs(b - a) for a, b in zip(locs, locs[1:]) if b != a), default=0.0)
            self.big = max((abs(v) for v in locs), default=0.0) >= 1e4

        def __call__(self, v, pos=None):
            return count(v, self.step) if self.big else f"{v:.4g}"

    return Scaled, Counts

"""Engineering prefixes for figures: 5e-05 J is "50 uJ", 2.5e+10 B/s is "25 GB/s".

Only SI units take a prefix (seconds, joules, bytes, bytes/s, hertz, watts, FLOP/s);
cycles, flits and shares keep their plain numbers. An axis picks one prefix from the
largest value it shows and scales every tick by it, so its label carries the unit.
"""

from __future__ import annotations

import math

PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"),
            (1e-12, "p"))
SI_UNITS = ("s", "J", "W", "B", "B/s", "Hz", "FLOP/s", "FLOP")


def prefixable(unit: str | None) -> bool:
    return bool(unit) and unit in SI_UNITS


def scale(largest: float, unit: str | None) -> tuple[float, str]:
    """(factor, prefixed unit) for values up to ``largest`` in ``unit``: (1e-6, 'uJ') for 5e-05 J."""
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


def engineering(v, unit: str | None) -> str:
    """One value with its unit: '25 GB/s', '50 uJ', '0.1 flits/node/cycle', '16'."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v} {unit}" if unit else str(v)
    factor, shown = scale(float(v), unit)
    text = number(v / factor) if prefixable(unit) else f"{v:g}"
    return f"{text} {shown}" if shown else text


def apply(ax, which: str, unit: str | None) -> str:
    """Scale the ticks of ``ax``'s x or y axis to one prefix of ``unit``; the prefixed unit for its label."""
    if not prefixable(unit):
        return unit or ""
    axis = ax.yaxis if which == "y" else ax.xaxis
    if axis.get_scale() != "linear":
        return unit or ""
    lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
    factor, shown = scale(max(abs(lo), abs(hi)), unit)
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: number(v / factor) if v else "0"))
    return shown

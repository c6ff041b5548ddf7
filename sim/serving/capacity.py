"""Serving capacity a paper can state, and the attainment curve behind it.

Capacity: the highest arrival-rate scale (a speed-up of the arrivals) at which the latency
objectives are met, with every lower scale tried met too. On a bursty trace attainment is not
monotone in the rate (a burst lands on a busy moment at one scale and between two at the next),
so a bisection (Vidur's search) finds *a* boundary that depends on where it started; here the
scales tried are fixed in advance:

1. scan: the lattice 2 ** (k / steps) for every whole k with lo <= 2 ** (k / steps) <= hi, upward,
   to the first scale that misses, and ``past`` lattice scales beyond it (whether attainment
   recovers is shown, never used: the answer is below the first miss);
2. refine: ``refine`` bisections in the exponent between the last scale met and the first missed,
   so the answer is within a factor 2 ** (1 / (steps * 2 ** refine)) of the boundary.

Every scale tried is a lattice point or a fixed subdivision of one lattice step, so two searches
whose bounds both bracket the capacity (the lowest lattice scale met, the first miss below hi)
try the same scales there and give the same answer. ``measure`` decides one scale; a trace too
short for its percentile is measured over replicas (benchmarks/serving_capacity.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable


@dataclass(frozen=True)
class Attainment:
    """What one scale gave: whether it met the objectives, and the figures that decided it."""

    scale: float
    met: bool
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass
class Capacity:
    """A capacity search: the answer and every scale tried, in order (the attainment curve)."""

    capacity: float  # 0.0: the lowest scale tried missed (the capacity is below --lo)
    resolution: float  # the answer is within this factor of the boundary it found (bounded)
    curve: list[tuple[str, Attainment]]  # (stage: "scan" or "refine", what the scale gave)
    bounded: bool  # a scale above the answer missed (False: every lattice scale up to hi met)

    @property
    def below_lo(self) -> bool:
        return self.capacity == 0.0

    @property
    def recovered(self) -> list[float]:
        """Scales above the answer that met again: attainment is not monotone there."""
        return sorted(a.scale for _, a in self.curve if a.met and a.scale > self.capacity)


def _scale(exponent: Fraction) -> float:
    return 2.0 ** float(exponent)


def lattice(lo: float, hi: float, steps: int) -> list[Fraction]:
    """The exponents k / steps (scale 2 ** (k / steps)) with lo <= scale <= hi, ascending."""
    if not 0 < lo <= hi:
        raise ValueError(f"the capacity search needs 0 < lo <= hi, got lo={lo}, hi={hi}")
    if steps < 1:
        raise ValueError(f"steps per doubling must be at least 1, got {steps}")
    first = math.ceil(steps * math.log2(lo) - 1e-9)
    last = math.floor(steps * math.log2(hi) + 1e-9)
    out = [Fraction(k, steps) for k in range(first, last + 1)]
    if not out:
        raise ValueError(f"no scale 2 ** (k / {steps}) lies in [{lo:g}, {hi:g}]: widen them or raise the steps")
    return out


def capacity(measure: Callable[[float], Attainment], lo: float, hi: float, steps: int = 4, refine: int = 2,
             past: int = 2) -> Capacity:
    """The highest scale met with every lower one tried met too: a scan of the lattice
    2 ** (k / steps) in [lo, hi], then ``refine`` bisections of the lattice step above it."""
    if refine < 0 or past < 0:
        raise ValueError("refine and past cannot be negative")
    curve: list[tuple[str, Attainment]] = []

    def tried(stage: str, exponent: Fraction) -> bool:
        a = measure(_scale(exponent))
        curve.append((stage, a))
        return a.met

    met: Fraction | None = None
    missed: Fraction | None = None
    beyond = 0
    for e in lattice(lo, hi, steps):
        if missed is not None:
            if beyond == past:
                break
            tried("scan", e)
            beyond += 1
        elif tried("scan", e):
            met = e
        else:
            missed = e
    resolution = 2.0 ** (1 / (steps * 2 ** refine))
    if met is None:
        return Capacity(0.0, resolution, curve, True)
    if missed is None:
        return Capacity(_scale(met), resolution, curve, False)
    low, high = met, missed
    for _ in range(refine):
        mid = (low + high) / 2
        if tried("refine", mid):
            low = mid
        else:
            high = mid
    return Capacity(_scale(low), resolution, curve, True)

"""Token counts of requests drawn from a distribution, and the random streams of a request's draws.

A sequence's prompt and output lengths, its arrival and (spec-decode) its accepted drafts are
pure functions of (global seed, stream, identifier) through sim/rng.py, so every shard and
backend computes the same answer without any message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim import rng
from sim.keys import Field, Issue, Table

DISTS = ("fixed", "uniform", "lognormal")
# rng stream ids of a request's draws (sim/rng.py uses 1..3, sim/chip 101, sim/workloads/base.py 204, 206)
STREAM_PROMPT, STREAM_OUTPUT, STREAM_ARRIVAL, STREAM_ACCEPT, STREAM_TRACE_JITTER = 201, 202, 203, 205, 207


@dataclass(frozen=True)
class Dist:
    """A distribution of token counts: fixed (``mean``), uniform on [lo, hi], or lognormal
    with median ``mean`` and shape ``sigma``, clipped to [lo, hi]."""

    kind: str = "fixed"
    mean: int = 128
    lo: int = 1
    hi: int = 1 << 20
    sigma: float = 0.5

    def draw(self, seed: int, stream: int, ident: int) -> int:
        if self.kind == "fixed":
            return int(self.mean)
        u = float(rng.uniform(seed, stream, ident, 0))
        if self.kind == "uniform":
            return int(self.lo + min(int(u * (self.hi - self.lo + 1)), self.hi - self.lo))
        # standard normal quantile z = sqrt(2) erfinv(2u - 1)
        z = math.sqrt(2.0) * _erfinv(2.0 * max(min(u, 1 - 1e-12), 1e-12) - 1.0)
        return int(min(max(round(self.mean * math.exp(self.sigma * z)), self.lo), self.hi))


def dist_table(default: Dist) -> Table:
    """Config keys of a token-count distribution, with ``default``'s values."""
    return Table({
        "dist": Field("choice", default.kind, "fixed (mean), uniform [min, max], lognormal (median mean)",
                      choices=DISTS),
        "mean": Field("int", default.mean, "fixed value or lognormal median", min=1),
        "min": Field("int", default.lo, "smallest value", min=1),
        "max": Field("int", default.hi, "largest value", min=1),
        "sigma": Field("float", default.sigma, "lognormal shape", min=0.0),
    }, doc="a distribution of token counts")


def dist_of(d: dict, key: str, issues: list[Issue]) -> Dist:
    if d["min"] > d["max"]:
        issues.append(Issue(f"{key}.min", "is larger than max"))
    return Dist(d["dist"], d["mean"], d["min"], d["max"], d["sigma"])


def _erfinv(y: float) -> float:
    """Inverse error function (Giles 2010, single-precision polynomial, |err| < 1e-6)."""
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941):
            p = c + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                  0.00943887047, 1.00167406, 2.83297682):
            p = c + p * w
    return p * y

"""Shared pieces of the workloads: length distributions, placement, roles on the grid.

Every workload decision that is not made by a unit at run time (a sequence's prompt
and output lengths, a token's experts, where a buffer goes) is a pure function of
(global seed, stream, identifier) through sim/rng.py, so every shard and backend
computes the same answer without any message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim import rng
from sim.chip.spec import CU, MU, unit_layout
from sim.keys import Field, Issue, Table

if TYPE_CHECKING:
    from sim.chip.config import ChipConfig

DISTS = ("fixed", "uniform", "lognormal")
# rng stream ids of the workloads (sim/rng.py uses 1..3, sim/chip 101)
STREAM_PROMPT, STREAM_OUTPUT, STREAM_ARRIVAL, STREAM_PLACE, STREAM_ACCEPT, STREAM_ROUTE = 201, 202, 203, 204, 205, 206
STREAM_TRACE_JITTER = 207


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


def tile_field(default, doc: str) -> Field:
    """A [row, col] config key."""
    return Field("list", default, doc, item=Field("int", min=0))


def tile_of(value, key: str, spec, lay, want: int | None, issues: list[Issue]) -> tuple[int, int] | None:
    """(row, col) of a [row, col] key, checked against the grid and, with ``want``, the unit kind."""
    if not isinstance(value, list) or len(value) != 2:
        issues.append(Issue(key, f"expected [row, col], got {value!r}"))
        return None
    r, c = value
    if not (0 <= r < spec.rows and 0 <= c < spec.cols):
        issues.append(Issue(key, f"tile {value} is outside the {spec.rows}x{spec.cols} grid"))
        return None
    kind = int(lay.kind[r * spec.cols + c])
    if want is not None and kind != want:
        names = {CU: "compute unit (row + col even)", MU: "memory unit (row + col odd)"}
        issues.append(Issue(key, f"tile {value} holds a {names[kind].split(' (')[0]}; this needs a {names[want]}"))
        return None
    return (r, c)


def memory_tier(spec, name: str, key: str, keeps: str, issues: list[Issue]) -> int:
    """Unit id of the controller of memory tier ``name`` (empty: the chip's first) a workload
    keeps ``keeps`` in; -1, with an issue naming ``key`` or the preset, when the chip has none."""
    if not spec.tiers:
        issues.append(Issue("chip.preset", f"{spec.name!r} has no memory tier to keep {keeps} in (e.g. preset "
                            "\"step\" or \"sn40l\")"))
        return -1
    name = name or spec.tiers[0].name
    if name not in {t.name for t in spec.tiers}:
        issues.append(Issue(key, f"{name!r}: chip {spec.name!r} has no such tier (its tiers: "
                            f"{', '.join(t.name for t in spec.tiers)})"))
        return -1
    return spec.tiles + spec.tier_index(name)


def tile_id(rc: tuple[int, int] | None, spec) -> int:
    return rc[0] * spec.cols + rc[1] if rc else 0


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


class Floorplan:
    """Static facts about the chip a workload places work on."""

    def __init__(self, cfg: ChipConfig) -> None:
        self.cfg = cfg
        self.spec = cfg.spec
        self.lay = unit_layout(cfg.spec)
        self.cus = self.lay.cus
        self.mus = self.lay.mus
        cols = cfg.spec.cols
        t = self.lay.tile
        self.row = t // cols
        self.col = t % cols
        self._near: dict[int, np.ndarray] = {}

    def unit_at(self, row: int, col: int) -> int:
        return row * self.spec.cols + col  # the CU or MU of that tile has the tile's id

    def hops(self, a: int, b: int) -> int:
        return int(abs(self.row[a] - self.row[b]) + abs(self.col[a] - self.col[b]))

    def nearest_mus(self, unit: int) -> np.ndarray:
        """MUs by distance from ``unit`` (ties by id)."""
        if unit not in self._near:
            d = np.abs(self.row[self.mus] - self.row[unit]) + np.abs(self.col[self.mus] - self.col[unit])
            self._near[unit] = self.mus[np.lexsort((self.mus, d))]
        return self._near[unit]

    def place(self, owner: int, slot: int, index: int, count: int, ident: int) -> int:
        """MU for buffer ``index`` of ``count`` belonging to work item ``ident`` that runs in
        ``slot`` on unit ``owner``, by the configured placement."""
        how = self.cfg.placement
        n = len(self.mus)
        if how == "near":
            return int(self.nearest_mus(owner)[index % n])
        if how == "random":
            return int(self.mus[int(rng.below(self.cfg.seed, STREAM_PLACE, ident, index, n))])
        return int(self.mus[(slot * count + index) % n])


def attention_cycles(tokens: int, heads: int, head_dim: int, flops_per_cycle: int) -> int:
    """One decode token's attention over ``tokens`` cached tokens: Q.K^T and A.V are
    2 * tokens * head_dim FLOP each per head, softmax about 5 per score."""
    flops = heads * tokens * (4 * head_dim + 5)
    return -(-flops // flops_per_cycle)

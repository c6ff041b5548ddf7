"""Shared pieces of the workloads: placement, roles on the grid, memory tiers, attention cycles.

Every workload decision that is not made by a unit at run time (a sequence's prompt
and output lengths, a token's experts, where a buffer goes) is a pure function of
(global seed, stream, identifier) through sim/rng.py, so every shard and backend
computes the same answer without any message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim import rng
from sim.chip.spec import CU, MU, unit_layout
from sim.keys import Field, Issue

if TYPE_CHECKING:
    from sim.chip.config import ChipConfig

# rng stream ids of the workloads (sim/rng.py uses 1..3, sim/chip 101; the requests' draws,
# 201-203, 205 and 207, are sim/serving/lengths.py's)
STREAM_PLACE, STREAM_ROUTE = 204, 206


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

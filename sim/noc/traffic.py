"""Synthetic traffic: Bernoulli packet creation and destination patterns.

Each node creates a packet in a cycle with probability ``rate / packet_flits``
(BookSim2's "bernoulli" process); the draw and the destination are counter-based
random numbers keyed by (seed, node, cycle), so a node's traffic is the same whatever
shard simulates it. Patterns (Dally & Towles, section 3.2): ``uniform`` over all nodes
including the source (as BookSim2 draws it), ``transpose`` (r, c) -> (c, r),
``bitcomp`` (r, c) -> (R-1-r, C-1-c) (the bit complement when R and C are powers of
two), ``neighbor`` (r, c) -> (r+1, c+1) mod (R, C) (BookSim2's), ``hotspot``: with
probability ``hotspot_fraction`` one of the hotspot nodes, otherwise uniform.

Patterns are looked up by name (``noc.traffic``): a pattern is a function ``(params, src,
cycle) -> destination`` over arrays, registered with ``@TRAFFIC_PATTERNS.register("name")``
in any module of ``sim/noc``; it must be a pure function of its arguments (random draws
through ``sim.rng`` keyed by source and cycle), so every shard draws the same packets.
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from sim import rng
from sim.noc.jit import inline, kernel
from sim.registry import Registry


class TrafficParams(Protocol):
    """What this module reads of a NoC's parameters (``sim.noc.params.NocParams`` is one):
    the grid, the seed, the pattern and its hotspots, the creation rate. Declared here, since
    the parameters check their pattern's name against this module's registry."""

    @property
    def rows(self) -> int: ...

    @property
    def cols(self) -> int: ...

    @property
    def nodes(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def traffic(self) -> str: ...

    @property
    def hotspots(self) -> tuple[int, ...]: ...

    @property
    def hotspot_fraction(self) -> float: ...

    @property
    def packet_rate(self) -> float:
        """Bernoulli probability that a node creates a packet in a cycle."""
        ...


TrafficPattern = Callable[[TrafficParams, np.ndarray, np.ndarray], np.ndarray]
TRAFFIC_PATTERNS: Registry[TrafficPattern] = Registry("traffic pattern", packages=("sim.noc",))


@TRAFFIC_PATTERNS.register("uniform")
def uniform(p: TrafficParams, src: np.ndarray, cycle: np.ndarray) -> np.ndarray:
    return rng.below(p.seed, rng.STREAM_DEST, src, cycle, p.nodes)


@TRAFFIC_PATTERNS.register("transpose")
def transpose(p: TrafficParams, src: np.ndarray, cycle: np.ndarray) -> np.ndarray:
    return (src % p.cols) * p.cols + src // p.cols


@TRAFFIC_PATTERNS.register("bitcomp")
def bitcomp(p: TrafficParams, src: np.ndarray, cycle: np.ndarray) -> np.ndarray:
    return (p.rows - 1 - src // p.cols) * p.cols + (p.cols - 1 - src % p.cols)


@TRAFFIC_PATTERNS.register("neighbor")
def neighbor(p: TrafficParams, src: np.ndarray, cycle: np.ndarray) -> np.ndarray:
    return ((src // p.cols + 1) % p.rows) * p.cols + (src % p.cols + 1) % p.cols


@TRAFFIC_PATTERNS.register("hotspot")
def hotspot(p: TrafficParams, src: np.ndarray, cycle: np.ndarray) -> np.ndarray:
    spots = np.asarray(p.hotspots, dtype=np.int64)
    u = rng.uniform(p.seed, rng.STREAM_HOTSPOT, src, cycle)
    pick = spots[np.minimum((u / max(p.hotspot_fraction, 1e-300) * len(spots)).astype(np.int64), len(spots) - 1)]
    return np.where(u < p.hotspot_fraction, pick, uniform(p, src, cycle))


def destinations(p: TrafficParams, src: np.ndarray, cycle: np.ndarray) -> np.ndarray:
    """Destination router of the packet ``src`` creates at ``cycle``."""
    return TRAFFIC_PATTERNS.get(p.traffic)(p, np.asarray(src, dtype=np.int64), cycle)


_mix64 = inline(rng.mix64)


@kernel
def bernoulli(keys, c0, c1, rate, out):
    """``rng.uniform(seed, stream, node, cycle) < rate`` for every cycle in [c0, c1) and node
    (``keys``: ``rng.component_keys`` of the nodes), compiled: the flat indices
    ``(cycle - c0) * nodes + node`` of the draws below, in order, into ``out``; returns
    how many. The same numbers as numpy's, at a fifth of the time (32x32: 7% of a run)."""
    n = 0
    nodes = keys.shape[0]
    for c in range(c0, c1):
        ctr = np.uint64(c) * rng.K_CTR
        for j in range(nodes):
            h = _mix64(keys[j] + ctr)
            if np.float64(h >> rng.UNIT_SHIFT) * rng.UNIT < rate:
                out[n] = (c - c0) * nodes + j
                n += 1
    return n


def creations(p: TrafficParams, nodes: np.ndarray, c0: int, c1: int):
    """Packets created by ``nodes`` in cycles [c0, c1): (cycle, node, destination) arrays.

    Sorted by cycle, then by the order of ``nodes``; at most one packet per node per cycle.
    """
    nodes = np.asarray(nodes, dtype=np.int64)
    if c1 <= c0 or p.packet_rate <= 0.0 or len(nodes) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    flat = np.empty((c1 - c0) * len(nodes), dtype=np.int64)  # room for every draw; only the created are written
    n = bernoulli(rng.component_keys(p.seed, rng.STREAM_INJECT, nodes), c0, c1, p.packet_rate, flat)
    ci, ni = np.divmod(flat[:n], len(nodes))
    cyc = ci + c0
    src = nodes[ni]
    return cyc, src, destinations(p, src, cyc)

"""The lockstep epoch protocol shared by every backend: windows, routing, termination.

An epoch is a window [t0, t1) that every shard simulates independently; at its end
the traffic that crossed a cut is delivered to its shards. Skip-ahead: the next
window starts at the earliest pending event anywhere (never before the last window's
end) and lasts one epoch length, so an idle stretch costs one exchange. These
functions are pure so that the in-process loop and the Ray actors, which compute the
same windows independently, cannot disagree.

What is simulated is a ``ShardModel`` (cluster/shard_model.py): it builds a shard for a
region, routes a shard's outbound traffic to the shards that own its destinations, and
decides when to stop from every shard's EpochMeta. ``NocModel`` runs the cycle-level NoC
with synthetic traffic (``rdasim noc``); the chip model (cluster/run_job.py) runs the
CU/MU grid (``rdasim run``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.shard_model import EpochShard
from sim.network import NetBoundary
from sim.noc.boundary import FlitBoundary
from sim.noc.shard import NocReport, NocShard


@dataclass(frozen=True)
class EpochMeta:
    """What one shard reports after an epoch (small; every shard sees every shard's)."""

    t0: int
    t1: int
    next_event: float  # earliest local pending event at or after t1
    earliest_out: float  # earliest due cycle of what it sent to other shards
    created: int  # progress counters, summed over shards by the stop rule: NoC measured
    finished: int  # packets created / ejected; chip requests admitted / finished
    active: bool = True  # False for the no-op epochs submitted after the run finished


@dataclass(frozen=True)
class Stop:
    done: bool
    saturated: bool


def next_window(metas: list[EpochMeta], epoch: int) -> tuple[int, int]:
    """The next epoch's window: skip to the global earliest event, then one epoch long."""
    t1 = metas[0].t1
    earliest = min(min(m.next_event for m in metas), min(m.earliest_out for m in metas))
    t0 = t1 if earliest == float("inf") else max(t1, int(earliest))
    return t0, t0 + epoch


def stop_rule(metas: list[EpochMeta], measure_end: int, horizon: int) -> Stop:
    """Finished when every packet created in the measurement window has been ejected
    (after the window closed), or saturated when that has not happened by the horizon."""
    t1 = metas[0].t1
    created = sum(m.created for m in metas)
    ejected = sum(m.finished for m in metas)
    if t1 >= measure_end and created == ejected:
        return Stop(True, False)
    if t1 >= horizon:
        return Stop(True, True)
    return Stop(False, False)


def idle_rule(metas: list[EpochMeta], horizon: int) -> Stop:
    """Finished when no shard has anything left to do and nothing is in transit;
    cut off (``saturated``) at the horizon."""
    quiet = all(m.next_event == float("inf") and m.earliest_out == float("inf") for m in metas)
    if quiet:
        return Stop(True, False)
    if metas[0].t1 >= horizon:
        return Stop(True, True)
    return Stop(False, False)


def meta_after(shard: EpochShard, t0: int, t1: int, out: NetBoundary) -> EpochMeta:
    created, finished = shard.counters()
    return EpochMeta(t0, t1, shard.next_event(), out.earliest(), created, finished)


class NocModel:
    """The cycle-level NoC under synthetic traffic, measured as ``rdasim noc`` reports it."""

    def __init__(self, params, owner: np.ndarray):
        self.p = params
        self.owner = owner
        self.measure_end = params.warmup_cycles + params.measure_cycles
        self.horizon = self.measure_end + params.drain_cycles

    def build(self, region, index: int) -> NocShard:
        return NocShard(self.p, region)

    def empty(self) -> FlitBoundary:
        return FlitBoundary()

    def concat(self, parts: list[FlitBoundary]) -> FlitBoundary:
        return FlitBoundary.concat(parts)

    def split(self, out: FlitBoundary, shards: int) -> list[FlitBoundary]:
        return NocShard.split(out, self.owner, self.p, shards)

    def stop(self, metas: list[EpochMeta]) -> Stop:
        return stop_rule(metas, self.measure_end, self.horizon)

    def report(self, shard: NocShard) -> NocReport:
        return shard.report()

    def in_transit(self, inbound: list[FlitBoundary]) -> int:
        return sum(b.flit_count() for b in inbound)

    def encode(self, b: FlitBoundary) -> list[list[np.ndarray]]:
        return b.sections()

    def decode(self, sections: list[list[np.ndarray]]) -> FlitBoundary:
        return FlitBoundary.from_sections(sections)

    @property
    def section_widths(self) -> tuple[int, ...]:
        return tuple(len(s) for s in FlitBoundary.SECTIONS)

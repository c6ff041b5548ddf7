"""The lockstep epoch protocol shared by every backend: windows, routing, termination.

An epoch is a window [t0, t1) that every shard simulates independently; at its end
the flits and credits that crossed a cut are delivered to their shards. Skip-ahead:
the next window starts at the earliest pending event anywhere (never before the last
window's end) and lasts one epoch length, so an idle stretch costs one exchange.
These functions are pure so that the in-process loop and the Ray actors, which
compute the same windows independently, cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.noc.shard import Boundary


@dataclass(frozen=True)
class EpochMeta:
    """What one shard reports after an epoch (small; every shard sees every shard's)."""

    t0: int
    t1: int
    next_event: float  # earliest local pending event at or after t1
    earliest_out: float  # earliest due cycle of what it sent to other shards
    measured_created: int
    measured_ejected: int
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
    created = sum(m.measured_created for m in metas)
    ejected = sum(m.measured_ejected for m in metas)
    if t1 >= measure_end and created == ejected:
        return Stop(True, False)
    if t1 >= horizon:
        return Stop(True, True)
    return Stop(False, False)


def split_by_shard(out: Boundary, owner: np.ndarray, vcs_per_router: int, shards: int) -> list[Boundary]:
    """Deliver a shard's outbound traffic: one Boundary per destination shard."""
    if not len(out):
        return [Boundary() for _ in range(shards)]
    fdst = owner[out.flit_ivc // vcs_per_router]
    cdst = owner[out.credit_ovc // vcs_per_router]
    return [out.select(fdst == s, cdst == s) for s in range(shards)]


def meta_after(shard, t0: int, t1: int, out: Boundary) -> EpochMeta:
    created, ejected = shard.counters()
    return EpochMeta(t0, t1, shard.next_event(), out.earliest(), created, ejected)

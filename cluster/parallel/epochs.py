"""The lockstep epoch protocol shared by every backend: windows, routing, termination.

An epoch is a window [t0, t1) that every shard simulates independently; at its end
the traffic that crossed a cut is delivered to its shards. Skip-ahead: the next
window starts at the earliest pending event anywhere (never before the last window's
end). Its length comes from what the shards hold (Chandy & Misra 1979, lookahead from
the sender's state): each shard reports the earliest cycle anything of its own could
arrive in another shard (``safe_until``, sim/noc/cut.py), and what it just sent can
act on a third shard one link lookahead after it arrives; the window ends at the least
of these, never sooner than one lookahead (``epoch``) and never later than
``MAX_WINDOW`` cycles after its start. Idle stretches and traffic far from the cut so
cost one exchange, as with one shard. These functions are pure so that the in-process
loop and the Ray actors, which compute the same windows independently, cannot disagree.

What is simulated is a ``ShardModel`` (cluster/parallel/model.py): it builds a shard for a
region, routes a shard's outbound traffic to the shards that own its destinations, and
decides when to stop from every shard's EpochMeta. ``NocModel`` runs the cycle-level NoC
with synthetic traffic (``rdasim noc``); the chip model (cluster/jobs/chip.py) runs the
CU/MU grid (``rdasim run``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.parallel.model import EpochShard
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
    safe_until: float = float("inf")  # earliest cycle anything it holds could arrive in another shard


@dataclass(frozen=True)
class Stop:
    done: bool
    saturated: bool


# the longest window of a cut run: how often progress, the stop rule and the driver see
# it when nothing is near any cut
MAX_WINDOW = 4096


def next_window(metas: list[EpochMeta], epoch: int) -> tuple[int, int]:
    """The next epoch's window: skip to the global earliest event, then run until the
    earliest cycle anything could cross a cut (at least ``epoch``, the link lookahead)."""
    t1 = metas[0].t1
    sent = min(m.earliest_out for m in metas)
    earliest = min(min(m.next_event for m in metas), sent)
    t0 = t1 if earliest == float("inf") else max(t1, int(earliest))
    # traffic delivered at d acts on another shard no sooner than d + lookahead
    bound = min(min(m.safe_until for m in metas), sent + epoch, t0 + max(epoch, MAX_WINDOW))
    return t0, max(t0 + epoch, int(bound))


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


def meta_after(shard: EpochShard, t0: int, t1: int, out: NetBoundary, shards: int = 1) -> EpochMeta:
    created, finished = shard.counters()
    # one shard, or a shard that cannot bound its output (a system of chips): windows of
    # ``epoch`` cycles, as the model asked (a system's grid chips rely on it)
    bound = getattr(shard, "earliest_output", None) if shards > 1 else None
    safe = float(bound().min()) if bound is not None else 0.0
    return EpochMeta(t0, t1, shard.next_event(), out.earliest(), created, finished, safe_until=safe)


class NocModel:
    """The cycle-level NoC under synthetic traffic, measured as ``rdasim noc`` reports it."""

    def __init__(self, params, owner: np.ndarray):
        self.p = params
        self.owner = owner
        self.measure_end = params.warmup_cycles + params.measure_cycles
        self.horizon = self.measure_end + params.drain_cycles

    def build(self, region, index: int) -> NocShard:
        return self.watching(NocShard(self.p, region))

    def watching(self, shard):
        """``shard``, told who owns each router when the grid is cut (its earliest output)."""
        if self.owner.max() > 0:
            shard.watch_cut(self.owner)
        return shard

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

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
cost one exchange, as with one shard. No window reaches past the model's ``horizon``: every
event before it is simulated and none at or after it, so a run cut off there ends at the same
cycle whatever the shard count, the windows or the backend. These functions are pure so that the in-process
loop and the Ray actors, which compute the same windows independently, cannot disagree.

What is simulated is a ``ShardModel`` (cluster/parallel/model.py): it builds a shard for a
region, routes a shard's outbound traffic to the shards that own its destinations, and
decides when to stop from every shard's EpochMeta, with ``stop_rule`` or ``idle_rule``
below. The models themselves live with their jobs (cluster/jobs).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from cluster.parallel.model import BoundedShard, EpochMeta, EpochShard, Stop, Traffic

# the longest window of a cut run: how often progress, the stop rule and the driver see
# it when nothing is near any cut
MAX_WINDOW = 4096


def first_window(epoch: int, horizon: int) -> tuple[int, int]:
    """The first epoch's window: one lookahead from cycle 0, within the horizon."""
    return 0, min(epoch, horizon)


def pending(metas: list[EpochMeta]) -> float:
    """The earliest cycle anything is left to happen anywhere: a shard's next event or traffic
    in transit (inf: nothing)."""
    return min(min(m.next_event for m in metas), min(m.earliest_out for m in metas))


def next_window(metas: list[EpochMeta], epoch: int, horizon: int) -> tuple[int, int]:
    """The next epoch's window: skip to the global earliest event, then run until the
    earliest cycle anything could cross a cut (at least ``epoch``, the link lookahead), never
    past ``horizon`` (nothing left before it: the empty window [horizon, horizon))."""
    t1 = metas[0].t1
    sent = min(m.earliest_out for m in metas)
    earliest = pending(metas)
    t0 = t1 if earliest == float("inf") else max(t1, int(earliest))
    # traffic delivered at d acts on another shard no sooner than d + lookahead
    bound = min(min(m.safe_until for m in metas), sent + epoch, t0 + max(epoch, MAX_WINDOW))
    return min(t0, horizon), min(max(t0 + epoch, int(bound)), horizon)


def stop_rule(metas: list[EpochMeta], measure_end: int, horizon: int) -> Stop:
    """Finished when every packet created in the measurement window has been ejected
    (after the window closed, or with nothing left to happen before the horizon), or
    saturated when that has not happened by the horizon."""
    t1, left = metas[0].t1, pending(metas)
    created = sum(m.created for m in metas)
    ejected = sum(m.finished for m in metas)
    if created == ejected and (t1 >= measure_end or left >= horizon):
        return Stop(True, False)
    if t1 >= horizon or left >= horizon:
        return Stop(True, True)
    return Stop(False, False)


def idle_rule(metas: list[EpochMeta], horizon: int) -> Stop:
    """Finished when no shard has anything left to do and nothing is in transit; cut off
    (``saturated``) at the horizon, or as soon as nothing is left to happen before it (the
    windows skip idle stretches: without this, the next would start past the horizon)."""
    left = pending(metas)
    if left == float("inf"):
        return Stop(True, False)
    if metas[0].t1 >= horizon or left >= horizon:
        return Stop(True, True)
    return Stop(False, False)


def bounds_windows(shard: EpochShard[Any, Any], shards: int) -> bool:
    """Whether ``shard``'s windows run as long as its state allows (``meta_after``): only when
    the grid is cut, and only for a shard that can bound its output (``BoundedShard``)."""
    return shards > 1 and isinstance(shard, BoundedShard)


def meta_after(shard: EpochShard[Any, Any], t0: int, t1: int, out: Traffic, bounded: bool = False) -> EpochMeta:
    """What ``shard`` reports after simulating [t0, t1) and sending ``out``; ``bounded``: it
    bounds its windows (``bounds_windows``), else windows of ``epoch`` cycles, as the model
    asked (one shard; a system's grid chips rely on it)."""
    created, finished = shard.counters()
    # checked once per run by bounds_windows: an isinstance on a Protocol every epoch costs microseconds
    safe = float(cast(BoundedShard[Any, Any], shard).earliest_output().min()) if bounded else 0.0
    return EpochMeta(t0, t1, shard.next_event(), out.earliest(), created, finished, safe_until=safe)


class WindowLengths:
    """How many epochs had each window length: the run's mean and median window without a list
    that grows with the epochs."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def add(self, cycles: int) -> None:
        self.counts[cycles] = self.counts.get(cycles, 0) + 1

    def stats(self) -> tuple[float, float]:
        """(mean, median) window length (cycles per epoch) for the run's report (the median of an
        even count is the mean of the middle two, as numpy's)."""
        n = sum(self.counts.values())
        if not n:
            return 0.0, 0.0
        total = sum(w * k for w, k in self.counts.items())
        lengths = sorted(self.counts)
        cum = np.cumsum([self.counts[w] for w in lengths])

        def kth(i: int) -> int:  # the i-th smallest (0-based)
            return lengths[int(np.searchsorted(cum, i, side="right"))]

        median = (kth((n - 1) // 2) + kth(n // 2)) / 2
        return round(total / n, 2), float(median)

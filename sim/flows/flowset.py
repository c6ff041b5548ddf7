"""A set of flows in continuous time: bytes left, max-min fair rates, finishes in order.

Time is a float count of cycles, so a flow's finish is exact (``start + bytes / rate`` for a
flow alone at its bottleneck); the unit that owns the resources rounds it to a cycle when
it acts on it. Rates are recomputed (``maxmin.max_min_rates``) only when the set changes and
time moves on: flows started at the same instant cost one re-rating. Flows finishing at the
same instant (within a relative 1e-9) finish together, in the order they were started, so
the outcome depends only on the calls made, never on anything else. With ``together`` > 0
(cycles), flows finishing within that much of the first to finish end with it, re-rated once
for them all (each still reports its own finish): a unit acting on whole cycles loses less
than a cycle of bandwidth per group and saves a re-rating per flow. A flow may wait for
another (``after``): it starts at the instant that one finishes, so a requester's
consecutive transfers from one memory form one stream served in order, as a DMA queue's are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.flows.maxmin import max_min_rates
from sim.noc.jit import kernel

TIE = 1e-9  # relative: finishes closer than this are the same instant
WIDTH = 4  # resources per route held in a row of the route table (grows when needed)


@dataclass(frozen=True, slots=True)
class Finished:
    """A flow that moved all its bytes at ``time`` (cycles, exact)."""

    key: Any
    time: float
    nbytes: int


class FlowSet:
    """Flows over resources of fixed capacities (bytes per cycle), max-min fair at every instant."""

    def __init__(self, together: float = 0.0) -> None:
        self.together = together
        self.capacity = np.zeros(0)
        self.t = 0.0  # the instant the bytes left are counted at
        self.keys = np.zeros(0, dtype=object)
        self.total = np.zeros(0, dtype=np.int64)
        self.left = np.zeros(0)
        self.cap = np.zeros(0)
        self.route = np.full((0, WIDTH), -1, dtype=np.int64)
        self.rate = np.zeros(0)
        self._new: list[tuple] = []  # flows started since the last re-rating: (key, nbytes, route, cap)
        self._after: dict = {}  # key -> the flow (key, nbytes, route, cap) that starts when it finishes
        self._live: set = set()  # keys started or waiting, not finished
        self._dirty = False
        self.moved = 0.0  # bytes moved by every flow so far (finished or not)

    def __len__(self) -> int:
        return len(self._live)

    def resource(self, capacity: float) -> int:
        """A new resource of ``capacity`` bytes per cycle; its index."""
        if not capacity > 0:
            raise ValueError(f"a resource needs a positive capacity, got {capacity}")
        self.capacity = np.append(self.capacity, float(capacity))
        return len(self.capacity) - 1

    def start(self, key, nbytes: int, route: tuple[int, ...], now: float, cap: float = math.inf,
              after=None) -> None:
        """Flow ``key`` of ``nbytes`` starts at ``now`` over the resources ``route`` (indices of
        ``resource``), never faster than ``cap``; or, with ``after`` the key of a flow not finished
        yet, the instant that one finishes. Call ``advance(now)`` first: time cannot go back."""
        if abs(now - self.t) > TIE * max(1.0, self.t):
            raise ValueError(f"a flow cannot start at {now}: the set's time is {self.t} (advance to it first)")
        if nbytes <= 0:
            raise ValueError(f"flow {key!r}: a flow moves at least one byte, got {nbytes}")
        if any(not 0 <= r < len(self.capacity) for r in route):
            raise ValueError(f"flow {key!r}: route {route} names a resource the set does not have")
        if not route and math.isinf(cap):
            raise ValueError(f"flow {key!r} crosses no resource and has no cap")
        if key in self._live:
            raise ValueError(f"flow {key!r} is already in the set")
        flow = (key, int(nbytes), tuple(route), float(cap))
        self._live.add(key)
        if after is not None and after in self._live:
            if after in self._after:
                raise ValueError(f"flow {after!r} already has a flow waiting for it")
            self._after[after] = flow
            return
        self._new.append(flow)
        self._dirty = True

    def advance(self, t: float) -> list[Finished]:
        """Move every flow on to instant ``t``; the flows that finish by then, in time order
        (re-rating after each finish, so the others speed up as bandwidth frees)."""
        out: list[Finished] = []
        while True:
            self._rerate()
            when = self.next_finish()
            if math.isinf(when) or when > t + TIE * max(1.0, t):
                if math.isfinite(t):
                    self._move(t)
                return out
            going = self.rate > 0
            own = np.full(len(self.left), math.inf)
            own[going] = self.t + self.left[going] / self.rate[going]  # each flow's finish at these rates
            due = (self.left <= TIE * np.maximum(self.total, 1.0)) | (
                own <= min(when + max(TIE * max(1.0, when), self.together), t + TIE * max(1.0, t)))
            idx = np.flatnonzero(due)
            self._move(float(np.max(np.minimum(own[idx], max(when, t if self.together else when)))))
            for i in idx.tolist():
                key = self.keys[i]
                out.append(Finished(key, min(float(own[i]), self.t), int(self.total[i])))
                self._live.discard(key)
                nxt = self._after.pop(key, None)
                if nxt is not None:  # the flow waiting for it starts now
                    self._new.append(nxt)
            self.moved += float(self.left[due].sum())
            keep = ~due
            self.keys = self.keys[keep]
            self.total, self.left, self.cap = self.total[keep], self.left[keep], self.cap[keep]
            self.route, self.rate = self.route[keep], self.rate[keep]
            self._dirty = True

    def next_finish(self) -> float:
        """The instant the next flow finishes at the current rates (inf: none will)."""
        self._rerate()
        return _soonest(self.t, self.left, self.rate)

    def rates(self) -> dict:
        """{key: rate} of every flow now (bytes per cycle)."""
        self._rerate()
        return dict(zip(self.keys.tolist(), self.rate.tolist()))

    # ------------------------------------------------------------------ internals
    def _move(self, t: float) -> None:
        dt = t - self.t
        if dt > 0 and len(self.left):
            step = self.rate * dt
            self.moved += float(step.sum())
            self.left = np.maximum(self.left - step, 0.0)
        self.t = max(self.t, t)

    def _rerate(self) -> None:
        if not self._dirty:
            return
        if self._new:
            width = max(WIDTH, self.route.shape[1], max(len(r) for _, _, r, _ in self._new))
            rows = np.full((len(self._new), width), -1, dtype=np.int64)
            for i, (_, _, r, _) in enumerate(self._new):
                rows[i, :len(r)] = r
            if width > self.route.shape[1]:
                pad = np.full((len(self.route), width - self.route.shape[1]), -1, dtype=np.int64)
                self.route = np.hstack([self.route, pad])
            new_keys = np.empty(len(self._new), dtype=object)
            new_keys[:] = [k for k, _, _, _ in self._new]
            self.keys = np.concatenate([self.keys, new_keys])
            nbytes = np.array([n for _, n, _, _ in self._new], dtype=np.int64)
            self.total = np.concatenate([self.total, nbytes])
            self.left = np.concatenate([self.left, nbytes.astype(float)])
            self.cap = np.concatenate([self.cap, [c for _, _, _, c in self._new]])
            self.route = np.vstack([self.route, rows])
            self._new = []
        on = self.route >= 0
        pair_flow = np.nonzero(on)[0]
        self.rate = max_min_rates(self.capacity, pair_flow, self.route[on], self.cap)
        self._dirty = False


@kernel
def _soonest(t, left, rate):
    """``t`` plus the least ``left / rate`` of the flows with a rate (inf: none has one): when
    the next flow finishes at these rates (compiled: a tier asks at every message it handles)."""
    least = np.inf
    for i in range(rate.shape[0]):
        if rate[i] > 0:
            d = left[i] / rate[i]
            if d < least:
                least = d
    return t + least if least < np.inf else np.inf

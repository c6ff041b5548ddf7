"""Several shards in one actor, when a run asks for more shards than there are cores.

More actors than cores take turns on them: every epoch then costs each actor a wake-up per
message and a wait for a core, and every actor its own start (3 column shards of
examples/moe_switch.toml on 2 cores spent ~1.7 ms an epoch exchanging against ~0.2 ms for the
same shards in one process). So the Ray backend gives each core one actor and each actor a
contiguous group of the shards, advanced one after another through every epoch as the
in-process backend does. The cut, the windows and the results are those of the shard count
asked for; only the shards sharing an actor swap their traffic inside it, at the epoch's end,
as the in-process backend does.
"""

from __future__ import annotations

from typing import Generic

import numpy as np

from cluster.parallel.model import BoundedShard, R, Rep, ShardModel, T


def actor_groups(shards: int, actors: int) -> list[list[int]]:
    """The shard indices each of ``actors`` actors runs: contiguous, as even as can be."""
    actors = max(1, min(actors, shards))
    edges = [round(i * shards / actors) for i in range(actors + 1)]
    return [list(range(edges[i], edges[i + 1])) for i in range(actors)]


class ShardGroup(Generic[R, T, Rep]):
    """Shards of one actor, to the epoch loop one shard: each epoch advances them one after
    another; what one sends another of the group is kept and delivered with the next
    epoch's inbound traffic, as crossing between actors would be."""

    def __init__(self, model: ShardModel[R, T, Rep], regions: list[R], indices: list[int], shards: int,
                 epoch: int) -> None:
        self.model, self.indices, self.n, self.epoch = model, indices, shards, epoch
        self.members = [model.build(r, i) for r, i in zip(regions, indices)]
        self._bounded = all(isinstance(s, BoundedShard) for s in self.members)
        self._nothing = model.empty()
        self._kept = self._nothing  # traffic between members, due in a later epoch
        self.t = 0

    def _split(self, inbound: T | None) -> list[T]:
        """Inbound traffic and what the members sent each other, per member."""
        parts = self.model.split(self._kept.join([inbound] if inbound is not None else []), self.n)
        self._kept = self._nothing
        return [parts[i] for i in self.indices]

    def advance(self, t0: int, t1: int, inbound: T | None = None) -> T:
        outs = [s.advance(t0, t1, b) for s, b in zip(self.members, self._split(inbound))]
        routed = self.model.split(self._nothing.join(outs), self.n)
        mine = set(self.indices)
        self._kept = self._nothing.join([routed[i] for i in self.indices])
        self.t = t1
        return self._nothing.join([routed[j] for j in range(self.n) if j not in mine])

    def next_event(self) -> float:
        return min([self._kept.earliest(), *(s.next_event() for s in self.members)])

    def deliver(self, inbound: T) -> None:
        for s, b in zip(self.members, self._split(inbound)):
            s.deliver(b)

    def counters(self) -> tuple[int, int]:
        pairs = [s.counters() for s in self.members]
        return sum(c for c, _ in pairs), sum(f for _, f in pairs)

    def earliest_output(self) -> np.ndarray:
        """The members' bounds, and what they sent each other: due at a member at d, it acts
        on another shard one lookahead later at the soonest (cluster/parallel/epochs.py)."""
        if not self._bounded:
            return np.zeros(self.n)  # no bound: windows of one lookahead
        out = np.minimum.reduce([s.earliest_output() for s in self.members])  # type: ignore[attr-defined]
        return np.minimum(out, self._kept.earliest() + self.epoch)

    def report(self) -> list[Rep]:
        """Its members' reports, in shard order."""
        return [s.report() for s in self.members]

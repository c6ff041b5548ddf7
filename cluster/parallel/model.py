"""The contracts of parallel simulation: what a shard offers the epoch loop, and what a
model offers the backends that run its shards (in-process or as Ray actors).

A ``ShardModel`` describes one kind of simulation (the NoC under synthetic traffic, the
CU/MU chip): it builds the shard of a region, routes a shard's outbound traffic to the
shards that own its destinations, packs that traffic for the wire as sections of int64
columns, and says when the run is over. An ``EpochShard`` advances its region through a
window of cycles given what arrives on its cut. Neither knows which backend runs it
(docs/design.md, "Parallel simulation").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from cluster.parallel.epochs import EpochMeta, Stop
    from sim.noc.topology import Region


@runtime_checkable
class EpochShard(Protocol):
    """One shard: a region of the grid advanced window by window."""

    t: int  # every cycle before this one has been simulated

    def advance(self, t0: int, t1: int, inbound: Any = None) -> Any:
        """Simulate [t0, t1) given ``inbound``; return what leaves (due at t1 or later)."""
        ...

    def next_event(self) -> float:
        """Earliest cycle >= t with something to do (inf: nothing)."""
        ...

    def deliver(self, inbound: Any) -> None:
        """Take inbound traffic without advancing (when the run stops)."""
        ...

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle anything this one holds could arrive there (the
        window bound, cluster/parallel/epochs.py); valid once the model built it for a cut.
        Optional: a shard without it (a system of chips) runs windows of one lookahead."""
        ...

    def counters(self) -> tuple[int, int]:
        """(work created, work finished) for the stop rule."""
        ...


@runtime_checkable
class ShardModel(Protocol):
    """What a backend needs to run shards of a model in lockstep."""

    horizon: int  # the cycle a run ends by at the latest (progress lines, cut-off)

    def build(self, region: "Region", index: int) -> EpochShard: ...

    def empty(self) -> Any:
        """Traffic addressed to nobody."""
        ...

    def concat(self, parts: list[Any]) -> Any: ...

    def split(self, out: Any, shards: int) -> list[Any]:
        """A shard's outbound traffic, one part per destination shard."""
        ...

    def stop(self, metas: list["EpochMeta"]) -> "Stop": ...

    def report(self, shard: Any) -> Any:
        """What a finished shard hands back (plain arrays, cheap to send from an actor)."""
        ...

    def in_transit(self, inbound: list[Any]) -> int:
        """Flits sent across a cut but not yet delivered."""
        ...

    def encode(self, b: Any) -> list[list[np.ndarray]]:
        """Traffic as sections of equal-length int64 columns (cluster/parallel/wire.py)."""
        ...

    def decode(self, sections: list[list[np.ndarray]]) -> Any: ...

    @property
    def section_widths(self) -> tuple[int, ...]:
        """Columns in each section ``encode`` produces."""
        ...

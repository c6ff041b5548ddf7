"""The contracts of parallel simulation and their data: what a shard offers the epoch loop,
what a model offers the backends that run its shards (in-process or as Ray actors), what
``simulate`` needs to cut a simulation into shards, and what a backend hands back.

A ``ShardModel`` describes one kind of simulation (the NoC under synthetic traffic, the
CU/MU chip, a system of chips): it builds the shard of a region, routes a shard's outbound
traffic to the shards that own its destinations, packs that traffic for the wire as
sections of int64 columns, and says when the run is over. An ``EpochShard`` advances its
region through a window of cycles given what arrives on its cut. Neither knows which
backend runs it (docs/design.md, "Parallel simulation"). A ``Decomposition`` says how one
simulation is cut: the regions of a shard count, the ShardModel of those regions, and the
epoch their cuts allow. Nothing here knows the NoC or any other model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

# how a backend reports how far a run has got: (cycles simulated, the run's horizon)
ProgressFn = Callable[[int, int], object]


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
    """The stop rule's verdict after an epoch."""

    done: bool
    saturated: bool  # cut off at the horizon rather than finished


@runtime_checkable
class Traffic(Protocol):
    """What a shard sends across its cut in one epoch (the model's boundary type)."""

    def earliest(self) -> float:
        """The earliest cycle any of it is due (inf: nothing)."""
        ...


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

    def counters(self) -> tuple[int, int]:
        """(work created, work finished) for the stop rule."""
        ...


@runtime_checkable
class BoundedShard(EpochShard, Protocol):
    """A shard that can bound its output from its state: cut runs then take windows as long
    as nothing can cross a cut (cluster/parallel/epochs.py); a shard without it runs windows
    of one lookahead."""

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle anything this one holds could arrive there (a system
        shard's own entry: at a grid chip of its own, which runs an epoch ahead of its network);
        valid once the model built it for a cut."""
        ...


@runtime_checkable
class ShardModel(Protocol):
    """What a backend needs to run shards of a model in lockstep."""

    horizon: int  # the cycle a run ends by at the latest (progress lines, cut-off)

    def build(self, region: Any, index: int) -> EpochShard: ...

    def empty(self) -> Any:
        """Traffic addressed to nobody."""
        ...

    def concat(self, parts: list[Any]) -> Any: ...

    def split(self, out: Any, shards: int) -> list[Any]:
        """A shard's outbound traffic, one part per destination shard."""
        ...

    def stop(self, metas: list[EpochMeta]) -> Stop: ...

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


@runtime_checkable
class Decomposition(Protocol):
    """One simulation as ``simulate`` cuts it into shards (cluster/parallel/simulate.py)."""

    # whether a pilot may choose the shard count (run.shards = "auto") or warn of a slow one
    pilots: ClassVar[bool]

    @property
    def horizon(self) -> int:
        """The cycle the run is cut off at."""
        ...

    @property
    def expected_cycles(self) -> int:
        """How long the run should be: what a pilot extrapolates to."""
        ...

    def regions(self, shards: int, cut: str) -> list[Any]:
        """The regions of ``shards`` shards cut as ``cut`` says (raises UserError if it cannot)."""
        ...

    def model(self, regions: list[Any]) -> ShardModel:
        """The ShardModel running these regions."""
        ...

    def epoch(self, regions: list[Any], requested: int | None) -> tuple[int, int | None]:
        """(epoch length, lookahead of the cuts; None: nothing is cut); rejects a requested
        epoch longer than the lookahead."""
        ...


@dataclass
class RunOutcome:
    """What a backend hands back after a run."""

    reports: list[Any]  # one model report per shard (NocReport for the NoC)
    epochs: int
    end_cycle: int  # end of the last epoch
    saturated: bool  # the stop rule cut the run off at its horizon
    wall_seconds: float
    sync_seconds: float  # time not spent advancing shards (exchange, waiting, RPC)
    in_transit_flits: int = 0  # flits sent across a cut but not yet delivered at the end
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """Runs a model's shards in lockstep, one per region, epochs of ``epoch`` cycles at least."""

    def __call__(self, model: ShardModel, regions: list[Any], epoch: int, address: str | None,
                 progress: ProgressFn | None) -> RunOutcome: ...

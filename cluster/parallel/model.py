"""The contracts of parallel simulation and their data: what a shard offers the epoch loop,
what a model offers the backends that run its shards (in-process or as Ray actors), what
``simulate`` needs to cut a simulation into shards, and what a backend hands back.

A ``ShardModel[Region, Traffic, Report]`` describes one kind of simulation (the NoC under
synthetic traffic, the CU/MU chip, a system of chips): it builds the shard of a region, routes
a shard's outbound traffic to the shards that own its destinations and says when the run is
over. Its traffic is a ``Traffic`` (sim/traffic.py): a ``Columnar`` declaring its columns, from
which the backends derive the rest (concatenation, the wire's sections, flits in transit), so a
model restates none of it. An ``EpochShard`` advances its region through a window of cycles
given what arrives on its cut, and hands back its report when the run is over. Neither knows
which backend runs it (docs/design.md, "Parallel simulation"). A ``Decomposition`` says how one
simulation is cut: the regions of a shard count, the ShardModel of those regions, and the epoch
their cuts allow. Nothing here knows the NoC or any other model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np

from sim.traffic import Traffic as Traffic  # the contract's traffic, declared beside its Columnar base

# how a backend reports how far a run has got: (cycles simulated, the run's horizon)
ProgressFn = Callable[[int, int], object]

R = TypeVar("R")  # a region: what one shard owns (a rectangle of a grid, a group of chips)
R_contra = TypeVar("R_contra", contravariant=True)
T = TypeVar("T", bound=Traffic)  # what crosses a cut in an epoch
Rep = TypeVar("Rep")  # what a finished shard hands back
Rep_co = TypeVar("Rep_co", covariant=True)


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
class EpochShard(Protocol[T, Rep_co]):
    """One shard: a region of the grid advanced window by window."""

    t: int  # every cycle before this one has been simulated

    def advance(self, t0: int, t1: int, inbound: T | None = None) -> T:
        """Simulate [t0, t1) given ``inbound``; return what leaves (due at t1 or later)."""
        ...

    def next_event(self) -> float:
        """Earliest cycle >= t with something to do (inf: nothing)."""
        ...

    def deliver(self, inbound: T) -> None:
        """Take inbound traffic without advancing (when the run stops)."""
        ...

    def counters(self) -> tuple[int, int]:
        """(work created, work finished) for the stop rule."""
        ...

    def report(self) -> Rep_co:
        """What the finished shard hands back (plain arrays and records, cheap to send from an actor)."""
        ...


@runtime_checkable
class BoundedShard(EpochShard[T, Rep_co], Protocol[T, Rep_co]):
    """A shard that can bound its output from its state: cut runs then take windows as long
    as nothing can cross a cut (cluster/parallel/epochs.py); a shard without it runs windows
    of one lookahead."""

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle anything this one holds could arrive there (a system
        shard's own entry: at a grid chip of its own, which runs an epoch ahead of its network);
        valid once the model built it for a cut."""
        ...


@runtime_checkable
class ShardModel(Protocol[R_contra, T, Rep_co]):
    """What a backend needs to run shards of a model in lockstep."""

    horizon: int  # the cycle a run ends by at the latest (progress lines, cut-off)

    def build(self, region: R_contra, index: int) -> EpochShard[T, Rep_co]:
        """The shard of ``region``, the ``index``-th of the run."""
        ...

    def empty(self) -> T:
        """Traffic addressed to nobody: the type's witness (``join``, ``decode``, ``widths``)."""
        ...

    def split(self, out: T, shards: int) -> list[T]:
        """A shard's outbound traffic, one part per destination shard."""
        ...

    def stop(self, metas: list[EpochMeta]) -> Stop:
        """Whether the run is over, from every shard's report of the last epoch."""
        ...


@dataclass(frozen=True)
class CutFigures:
    """What a run in one process has seen of a cut (cluster/parallel/shard_plan.py), counted from
    its start: the work in each region (flits through its routers, for a grid) and the traffic
    that crossed between regions (flits, for a grid), over its first ``cycles`` cycles."""

    cycles: int
    work: tuple[float, ...]  # per region
    crossings: float

    def since(self, earlier: "CutFigures") -> "CutFigures":
        """What was seen after ``earlier`` (the same cut, counted to an earlier cycle)."""
        return CutFigures(self.cycles - earlier.cycles, tuple(a - b for a, b in zip(self.work, earlier.work)),
                          self.crossings - earlier.crossings)

    @property
    def shares(self) -> tuple[float, ...]:
        """Each region's share of the work (equal shares when there was none)."""
        total = sum(self.work)
        return tuple(w / total for w in self.work) if total else tuple(1 / len(self.work) for _ in self.work)


@runtime_checkable
class Decomposition(Protocol[R, T, Rep_co]):
    """One simulation as ``simulate`` cuts it into shards (cluster/parallel/simulate.py)."""

    # whether "auto" may choose the shard count (run.shards = "auto") or warn of a slow one
    pilots: ClassVar[bool]

    @property
    def horizon(self) -> int:
        """The cycle the run is cut off at."""
        ...

    @property
    def expected_cycles(self) -> int:
        """How long the run should be: what a plan extrapolates to."""
        ...

    def regions(self, shards: int, cut: str) -> list[R]:
        """The regions of ``shards`` shards cut as ``cut`` says (raises UserError if it cannot)."""
        ...

    def model(self, regions: list[R]) -> ShardModel[R, T, Rep_co]:
        """The ShardModel running these regions."""
        ...

    def epoch(self, regions: list[R], requested: int | None) -> tuple[int, int | None]:
        """(epoch length, lookahead of the cuts; None: nothing is cut); rejects a requested
        epoch longer than the lookahead."""
        ...


@runtime_checkable
class MeasuresCuts(Decomposition[R, T, Rep_co], Protocol[R, T, Rep_co]):
    """A Decomposition whose run, in one process, can say how a cut would have split it: a plan
    (cluster/parallel/shard_plan.py) then decides from the run's own opening, without piloting
    the cut."""

    def cut_figures(self, shard: EpochShard[T, object], regions: list[R]) -> CutFigures:
        """What ``shard``, the whole run in one process, has seen so far of a cut into ``regions``."""
        ...


@dataclass(frozen=True)
class BackendFigures:
    """How a backend's run spent its time: per actor on Ray (an actor may run several shards,
    cluster/parallel/groups.py), per shard in one process."""

    chaining: str  # "in-process", or how Ray actors chained epochs: "direct", "driver", "compiled-graph"
    busy_seconds: Sequence[float]  # advancing shards
    exchange_seconds: Sequence[float]  # everything else: routing and packing traffic, exchanging, waiting
    peak_rss_bytes: Sequence[int]  # per actor; in one process, the process's own
    window_mean: float  # cycles per epoch
    window_median: float
    waiting_seconds: Sequence[float] = ()  # Ray: of the exchange, waiting for the peers' epochs
    handling_seconds: Sequence[float] = ()  # Ray: in epoch calls, neither advancing nor waiting
    actor_pids: Sequence[int] = ()  # Ray: each actor's process (a warm actor's serves run after run)
    lockstep_seconds: float = 0.0  # in one process: per epoch, the slowest shard's time, summed

    @property
    def actors(self) -> int:
        """Ray actors that ran the shards (0: in this process)."""
        return len(self.actor_pids)


@dataclass
class RunOutcome(Generic[Rep]):
    """What a backend hands back after a run."""

    reports: list[Rep]  # one report per shard, in shard order (NocReport for the NoC)
    epochs: int
    end_cycle: int  # end of the last epoch
    saturated: bool  # the stop rule cut the run off at its horizon
    wall_seconds: float
    sync_seconds: float  # time not spent advancing shards (exchange, waiting, RPC)
    in_transit_flits: int  # flits sent across a cut but not yet delivered at the end
    figures: BackendFigures


class Backend(Protocol):
    """Runs a model's shards in lockstep, one per region, epochs of ``epoch`` cycles at least."""

    def __call__(self, model: ShardModel[R, T, Rep], regions: list[R], epoch: int, address: str | None,
                 progress: ProgressFn | None) -> RunOutcome[Rep]: ...

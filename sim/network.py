"""The network seam: what a NoC model offers the chip shard and the epoch loop.

A NoC model simulates the routers of one rectangular region of the grid (a shard) from
cycle ``t0`` to ``t1`` given what crosses its cut, and returns what leaves it. The chip
offers it packets (``offer``) and collects the ones that reached their destination
terminal (``take_ejected``); the epoch loop asks when it next has work (``next_event``)
and hands it traffic that arrives from other shards (``advance``'s ``inbound``, or
``deliver`` when the run stops). A model never knows which process its neighbours live in.

Models register by name in ``NETWORKS`` (``noc.model`` in a config): ``cycle`` (virtual-
channel routers flit by flit, sim/noc) and ``packet`` (link reservations, sim/packetnoc).
Adding one is a module in either package that defines a class satisfying ``NetworkShard``
and registers it (docs/design.md, "Adding a NoC model").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from sim.registry import Registry
from sim.traffic import Traffic

if TYPE_CHECKING:
    from sim.noc.params import NocParams
    from sim.noc.topology import Region

# a model's own boundary class: its shards take and return only that kind of traffic
B = TypeVar("B", bound=Traffic)


# traffic crossing shard cuts: a model's boundary class subclasses sim/traffic.py's Columnar,
# declaring its columns (its empty value is the class called with no arguments)
NetBoundary = Traffic


@dataclass(frozen=True)
class LinkCounts:
    """Flits over each directed router-to-router link of a shard, over the whole run."""

    router: np.ndarray  # global id of the upstream router
    port: np.ndarray  # its output port (sim.noc.topology: 1 E, 2 W, 3 S, 4 N)
    flits: np.ndarray


@runtime_checkable
class NetworkShard(Protocol[B]):
    """One shard of a NoC model (see the module docstring), exchanging boundaries of type ``B``."""

    @property
    def boundary(self) -> type[B]:
        """Its NetBoundary class (a class attribute; called with no arguments: traffic to nobody)."""
        ...

    t: int  # every cycle before this one has been simulated

    def offer(self, cycles: np.ndarray, src: np.ndarray, dst: np.ndarray, flits: np.ndarray | None = None) -> None:
        """Packets created at ``cycles`` by routers ``src`` (of this shard) for ``dst``."""
        ...

    def advance(self, t0: int, t1: int, inbound: B | None = None) -> B:
        """Simulate [t0, t1); return what leaves the shard (all of it due at t1 or later)."""
        ...

    def deliver(self, inbound: B) -> None:
        """Take traffic from other shards without advancing."""
        ...

    def next_event(self) -> float:
        """Earliest cycle >= t at which this shard has something to do (inf: nothing)."""
        ...

    def watch_cut(self, owner: np.ndarray, relay: int = -1) -> None:
        """Learn who owns each router (``owner[router]`` = shard) for ``earliest_output``;
        ``relay >= 0``: a terminal that receives a packet may send ``relay`` cycles later."""
        ...

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle anything this shard holds could arrive there
        (inf: never; conservative: every hop at its least delay, sim/noc/cut.py)."""
        ...

    def offer_reach(self) -> np.ndarray:
        """[local routers, shards] least cycles from an offer at a router to arriving in each shard."""
        ...

    def take_ejected(self) -> tuple[np.ndarray, np.ndarray]:
        """(packet ids, cycle each tail reached its terminal) since the last call."""
        ...

    def counters(self) -> tuple[int, int]:
        """(measured packets created, measured packets ejected) for the NoC's stop rule."""
        ...

    def link_totals(self) -> LinkCounts:
        """Flits over every link the shard owns, counted as they crossed it."""
        ...

    @classmethod
    def split(cls, out: B, owner: np.ndarray, params: NocParams, shards: int) -> list[B]:
        """``out`` cut into one boundary per destination shard (``owner[router]`` = shard)."""
        ...


@runtime_checkable
class StopsAtEjection(Protocol):
    """A NoC model that can stop early, at a packet's arrival (the chip then takes longer
    windows: sim/chip/shard.py); a model without it advances a window of fixed length."""

    def advance_to_ejection(self, t0: int, t1: int, relay: int) -> tuple[Any, int]:
        """Simulate from ``t0`` to ``t1`` or to ``relay`` cycles past the first tail that
        reaches its terminal meanwhile, whichever comes first; return (what leaves the
        shard, the cycle reached)."""
        ...


class NetworkFactory(Protocol[B]):
    """How a registered model is built: the shard class itself."""

    # read-only, not a ClassVar: the factory is the class, so its class attributes are the
    # factory's own (a ClassVar protocol member can never be matched by a class object)
    @property
    def boundary(self) -> type[B]: ...

    @property
    def route_entry_bytes(self) -> int:
        """Bytes its routing table takes per (router, destination) at their peak: what a run's
        memory estimate counts (cluster/config/footprint.py)."""
        ...

    def __call__(self, params: NocParams, region: Region, record_ejections: bool = False,
                 measure: bool = True) -> NetworkShard[B]: ...

    def split(self, out: B, owner: np.ndarray, params: NocParams, shards: int) -> list[B]: ...


# a new model is a module in one of these packages that registers its shard class (each model
# has its own boundary type, hence Any)
NETWORKS: Registry[NetworkFactory[Any]] = Registry("NoC model", packages=("sim.noc", "sim.packetnoc"))

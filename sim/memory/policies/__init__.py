"""MU memory policies: where a buffer's bytes live and what growing it costs.

A policy only does the bookkeeping (no timing): ``create`` reserves a new buffer,
``grow`` makes room for a larger size (or reports that memory ran out), ``shrink``
and ``release`` give room back, ``copy_done`` returns the old region of a growth that
had to copy. The MU turns the answers into time (copies at the MU's bandwidth, block-
table lookups) and into out-of-memory behaviour (sim/chip/memory_unit.py).

Policies register by name in ``POLICIES`` (``memory.policy``); each is a frozen params
dataclass subclassing ``PolicyParams`` (its config keys declared beside it in ``KEYS``, flat
under [memory]) that builds its ``Storage`` for an MU, and takes ``PolicyParams``'s defaults
for what it does not do (blocks, spilling, cross-key checks, bookkeeping worth estimating).
Built in: ``static-single`` (static_single.py), ``static-multi`` (static_multi.py), both on
contiguous.py's slots, ``realloc-copy`` (realloc.py), ``virtual`` (virtual.py). Adding one is a
module in this package (docs/design.md, "Adding a memory policy").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from allocators.errors import AllocatorError
from mapping.placement import MuRoom
from sim.keys import Field, Issue
from sim.registry import Registry


@dataclass(frozen=True)
class MuGeometry:
    """What an MU tells its storage policy about itself."""

    capacity: int  # bytes of scratchpad
    word_bytes: int = 4  # the reference's offset counts words
    align: int = 64  # contiguous regions start on SRAM rows
    mu_id_bits: int = 6
    buffer_id_bits: int = 16
    virtual_bits: int = 16  # virtual block + word offset in a reference


@dataclass(frozen=True)
class Growth:
    """What a create or grow reserved, and any copy it needs."""

    reserved: int  # bytes newly reserved
    copy_bytes: int = 0  # bytes that must be copied before the old region can go
    old_start: int = -1  # the region to give back (copy_done) once the copy is done


@dataclass(frozen=True, slots=True)
class Extent:
    """A piece of an MU's scratchpad for memory maps: a region (contiguous policies) or a
    block (paged policies). ``buffer`` -1: free; -2: the old region of a growth being copied."""

    start: int  # byte address
    size: int
    buffer: int
    used: int = 0  # bytes of data in it (regions)
    virtual: int = -1  # virtual block index (blocks)


@runtime_checkable
class Storage(Protocol):
    """How one MU holds its buffers under a policy; ``used``/``reserved`` are its live data
    and reserved bytes, ``size`` each buffer's data bytes."""

    translates: bool  # accesses pay a block-table lookup
    paged: bool  # extents() lists blocks (else regions)
    used: int
    reserved: int
    size: dict[int, int]

    def create(self, buf: int, nbytes: int) -> Growth | None:
        """Reserve a new buffer with room for ``nbytes``; None when it does not fit."""
        ...

    def grow(self, buf: int, nbytes: int) -> Growth | None:
        """Make room for ``nbytes`` in ``buf``; None when memory ran out."""
        ...

    def shrink(self, buf: int, nbytes: int) -> int:
        """Keep room for ``nbytes``; returns bytes released."""
        ...

    def release(self, buf: int) -> int:
        """Free the buffer; returns bytes released."""
        ...

    def set_size(self, buf: int, nbytes: int) -> None: ...

    def copy_done(self, old_start: int) -> int:
        """A growth's copy finished: release its old region; returns bytes released."""
        ...

    def extents(self) -> list[Extent]:
        """The scratchpad by address, for memory maps."""
        ...

    def external_fragmentation(self) -> float: ...


@dataclass(frozen=True)
class Footprint:
    """What a policy's bookkeeping holds in the simulator's memory for one MU at its fullest (an
    estimate: cluster/config/footprint.py refuses a config that cannot fit)."""

    bytes: float
    what: str  # in words, for the refusal ("a block table of 64 blocks")


# a check of the resolved [memory] table across keys: (key under memory., problem) pairs
MemoryCheck = Callable[[dict[str, Any]], list[tuple[str, str]]]


class PolicyParams(Protocol):
    """A registered policy's parameters: a frozen dataclass whose first field is ``name``,
    subclassing this class to take the defaults of the members with a body."""

    @property
    def name(self) -> str: ...

    KEYS: ClassVar[dict[str, Field]]
    # checks of the [memory] table across keys, run for every config whatever its policy
    CHECKS: ClassVar[tuple[MemoryCheck, ...]] = ()
    block_bytes: int = 0  # a paged policy's block; 0: contiguous regions (the runs' block_bytes column)
    # its block tables can name another MU's blocks, so memory.spill may grow a buffer into them
    SPILLING: ClassVar[bool] = False

    @property
    def spills(self) -> bool:
        """A full MU's buffers grow into other MUs' blocks (sim/chip/spill.py). Never, by default."""
        return False

    def footprint(self, mu: MuGeometry) -> Footprint:
        """Its bookkeeping for one MU at its fullest. A few regions per buffer, by default: nothing worth counting."""
        return Footprint(0.0, "")

    @classmethod
    def from_config(cls, name: str, memory: dict[str, Any]) -> "PolicyParams":
        """Parameters from the resolved [memory] table."""
        ...

    def problems(self, mu: MuGeometry) -> list[Issue]:
        """What makes these parameters unusable on this MU (key paths under memory.)."""
        ...

    def room(self, mu: MuGeometry) -> MuRoom:
        """How an MU gives out room under this policy (what a placement must plan for)."""
        ...

    def storage(self, mu: MuGeometry) -> Storage: ...


POLICIES: Registry[type[PolicyParams]] = Registry("memory policy", packages=("sim.memory.policies",))


def policy_params(name: str, **values: Any) -> PolicyParams:
    """Parameters of policy ``name``: its defaults with ``values`` (the config's keys) over them."""
    cls = POLICIES.get(name)
    return cls.from_config(name, values)


class StorageBase:
    """The accounting every policy shares: bytes of data per buffer, used and reserved totals."""

    translates = False
    paged = False

    def __init__(self) -> None:
        self.size: dict[int, int] = {}  # buffer -> bytes of data it holds
        self.used = 0
        self.reserved = 0

    def buffers(self) -> int:
        return len(self.size)

    def external_fragmentation(self) -> float:
        return 0.0

    def set_size(self, buf: int, nbytes: int) -> None:
        self.used += nbytes - self.size[buf]
        self.size[buf] = nbytes

    def copy_done(self, old_start: int) -> int:
        return 0


def largest_buffer(room: MuRoom) -> int:
    """The largest buffer an MU can ever hold under a policy (its room): no free makes more."""
    return min(room.capacity, room.biggest)


def holding(policy: PolicyParams, mu: MuGeometry, nbytes: int, max_capacity: int = 1 << 40,
            max_bits: int = 48) -> MuGeometry | None:
    """The least MU (bytes: its own or a power of two, then the fewest reference offset bits) on
    which ``policy`` holds a buffer of ``nbytes`` (``largest_buffer``); None if none up to the
    limits. What an error suggests when a buffer is larger than an MU can hold."""
    sizes = [mu.capacity] + [1 << k for k in range(max(1, nbytes - 1).bit_length(), max_capacity.bit_length())
                             if 1 << k > mu.capacity]
    for capacity in sizes:
        for bits in range(mu.virtual_bits, max_bits + 1):
            g = replace(mu, capacity=capacity, virtual_bits=bits)
            try:
                if not policy.problems(g) and largest_buffer(policy.room(g)) >= nbytes:
                    return g
            except (ValueError, AllocatorError):  # a geometry the policy cannot lay out at all
                continue
    return None


def keyed_defaults(cls: Any, memory: dict[str, Any]) -> dict[str, Any]:
    """The values of ``cls.KEYS`` in ``memory``, defaults where absent (for ``from_config``)."""
    return {k: memory[k] if memory.get(k) is not None else f.default for k, f in cls.KEYS.items()}

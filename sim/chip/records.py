"""Typed records a chip run produces, and the table columns derived from them.

A record's fields, in order, are the columns of its result table (cluster/results/schemas.py
builds the Arrow schema from the ``column`` metadata: type and documentation), so a column
is declared once. ``row()`` gives the values in column order (sorting and hashing use it).
"""

from __future__ import annotations

import zlib
from dataclasses import astuple, dataclass, field, fields
from typing import Any

# buffer labels: the code a workload puts in an allocation request, and its name in tables
BUFFER_LABELS: dict[int, str] = {0: "other"}


def buffer_label(code: int, name: str) -> int:
    """Declare a buffer label (a workload module does it for its own buffers); returns ``code``."""
    if BUFFER_LABELS.get(code, name) != name:
        raise ValueError(f"buffer label {code} is already {BUFFER_LABELS[code]!r}")
    BUFFER_LABELS[code] = name
    return code


# a landing buffer: data another chip writes into it (its MU logs a LandingLife when it frees one)
LANDING = buffer_label(8, "landing")


def column(arrow: str, doc: str) -> Any:
    """A record field that is also a table column: its Arrow type name and its documentation."""
    return field(metadata={"arrow": arrow, "doc": doc})


def columns(record: type) -> list[tuple[str, str, str]]:
    """(name, Arrow type name, doc) of every column of a record class."""
    return [(f.name, f.metadata["arrow"], f.metadata["doc"]) for f in fields(record)]


@dataclass(frozen=True, slots=True)
class BufferLife:
    """One allocation's life at its MU (a row of run_buffers)."""

    alloc: int = column("int64", "allocation id (MU unit id * 2**32 + the MU's count)")
    mu: int = column("int32", "MU unit id")
    buffer: int = column("int32", "MU-local buffer id (reused after a free)")
    label: int = column("string", "what the buffer holds: kv, activation, expert-input, race, ...")
    owner: int = column("int32", "unit that allocated it")
    created: int = column("int64", "cycle of the allocation")
    freed: int = column("int64", "cycle of the free (-1: never freed, a leak)")
    freed_by: str = column("string", "free, refcount or weight")
    peak_bytes: int = column("int64", "largest size reached")
    grows: int = column("int64", "times its reservation grew")
    copies: int = column("int64", "realloc-copy moves")
    bytes_copied: int = column("int64", "bytes copied by those moves")
    evicted: bool = column("bool", "evicted to DRAM at some point")
    total_weight: int = column("int64", "partial-free: weight handed out in all")
    collected_weight: int = column("int64", "partial-free: weight returned")

    def row(self) -> tuple:
        return astuple(self)

    def coded(self, names: dict[int, str]) -> tuple:
        """Its row as integers (what a shard keeps): ``freed_by`` as the CRC-32 of its name, which
        ``names`` learns (code -> name), ``evicted`` as 0 or 1."""
        code = zlib.crc32(self.freed_by.encode())
        names[code] = self.freed_by
        r = astuple(self)
        return (*r[:7], code, *r[8:12], int(self.evicted), *r[13:])


@dataclass(slots=True)
class BufferRecord:
    """A buffer an MU holds, while it holds it (mutable: sizes, counts and reads change as
    messages arrive); ``life`` is its closed record once freed."""

    buf: int
    alloc: int
    owner: int
    label: int
    created: int
    size: int = 0  # bytes of data (also while evicted)
    count: int = 1  # refcount protocols
    total: int = 0  # partial-free: weight handed out in all
    collected: int = 0  # partial-free: weight returned
    peak: int = 0
    grows: int = 0
    copies: int = 0
    copied: int = 0
    evicted: bool = False
    failed: bool = False
    last_use: int = 0
    reads: list = field(default_factory=list)  # reads waiting for data
    stream: bool = False  # a tile buffer: room reserved once, writes advance ``written``
    room: int = 0  # stream: bytes reserved
    written: int = 0  # stream: bytes written so far (its stream position)

    def life(self, mu: int, freed: int, how: str) -> BufferLife:
        return BufferLife(self.alloc, mu, self.buf, self.label, self.owner, self.created, freed, how, self.peak,
                          self.grows, self.copies, self.copied, self.evicted, self.total, self.collected)


@dataclass(frozen=True, slots=True)
class WorkRecord:
    """A unit of a workload's work, as its program reports it (a request, a step, a trial)."""

    kind: str  # "request" (what latency and throughput count) or "step"
    ident: int
    start: int  # cycle it arrived or started
    end: int  # cycle it finished
    tokens: int
    status: str  # "ok" or "failed"

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class CarriedTile:
    """A loop-carried tile written (mapping/looping.py): when a looped layer's output left a CU."""

    tile: int  # its iteration (layer x tiles a layer + tile)
    cu: int
    cycle: int

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One CU's share of a kernel in one partition of a mapped (dataflow) run."""

    partition: int = column("int64", "partition run (graph pass x partitions + position)")
    kernel: str = column("string", "kernel name")
    cu: int = column("int32", "CU unit id (its tile id)")
    start: int = column("int64", "cycle the CU started the kernel")
    end: int = column("int64", "cycle it finished (last tile written and read)")
    compute_cycles: int = column("int64", "cycles its pipeline computed")
    bytes_in: int = column("int64", "bytes it read (MUs and DRAM)")
    bytes_out: int = column("int64", "bytes it wrote (MUs and DRAM)")

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """One partition run of a mapped (dataflow) run."""

    partition: int  # graph pass x partitions + position
    index: int  # the plan's partition index
    start: int  # cycle the controller began allocating its buffers
    started: int  # cycle its CUs were told to start (buffers allocated and shared)
    end: int  # cycle its last CU finished
    status: str

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class HomeRecord:
    """A region a mapped run took in a memory tier for its weights or caches, or the copy of its
    weights from the tier they are homed in to the one they stream from (the model switch)."""

    what: str  # "weights", "staged weights", "kv", "switch"
    tier: str  # the tier holding it (a switch: the tier copied to)
    nbytes: int
    start: int  # cycle the controller asked
    end: int  # cycle it was answered (a switch: the last byte written)
    status: str  # ok, or full (the tier refused it)

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class LandingLife:
    """A landing buffer (sim/chip/exchange.py) its MU freed: what landed and what the memory policy held for it."""

    mu: int  # MU unit id
    alloc: int  # allocation id
    created: int  # cycle of the allocation
    freed: int  # cycle of the free
    nbytes: int  # data bytes it held at most (what the other chip wrote)
    reserved: int  # bytes the policy held for it when it was freed (blocks, a grown region, a static slot)

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class Oversize:
    """A request an MU refused because no MU could ever hold the buffer it asked for (under
    the memory policy): waiting for memory to be freed would wait forever."""

    cycle: int
    mu: int  # MU unit id
    label: int  # the buffer's label (BUFFER_LABELS)
    nbytes: int  # the size asked for
    largest: int  # the largest buffer an MU holds under the policy

    def row(self) -> tuple:
        return astuple(self)

    def describe(self, policy: str) -> str:
        return (f"{BUFFER_LABELS.get(self.label, 'other')} buffer of {self.nbytes:,} B (MU {self.mu}, cycle "
                f"{self.cycle:,}) is larger than an MU can hold ({self.largest:,} B under policy {policy})")


@dataclass(slots=True)
class MuStats:
    """An MU's counters (summed over MUs and shards into the run summary)."""

    oom_events: int = 0
    stalls: int = 0
    stall_cycles: int = 0
    evictions: int = 0
    bytes_evicted: int = 0
    failures: int = 0
    bytes_copied: int = 0
    copy_cycles: int = 0
    translations: int = 0
    sync_acks: int = 0
    weight_topups: int = 0
    read_bytes: int = 0  # bytes its SRAM port read (reads, evictions, streams; copies are bytes_copied)
    write_bytes: int = 0  # bytes its SRAM port wrote (appends, writes)
    spilled_blocks: int = 0  # memory.spill: blocks other MUs granted to its buffers
    spilled_bytes: int = 0  # memory.spill: data bytes it sent to its buffers' blocks on other MUs
    remote_reads: int = 0  # memory.spill: reads of its buffers' blocks on other MUs (one per MU a read touched)

    def add(self, other: "MuStats") -> "MuStats":
        return MuStats(*(a + b for a, b in zip(astuple(self), astuple(other))))


MU_STATS = tuple(f.name for f in fields(MuStats))

"""Collective algorithms and their alpha-beta closed forms; the one a message size calls for.

A collective library (NCCL's tuner, MPICH's and Open MPI's decision rules) picks, for each
call, the algorithm whose modelled time is least: latency-optimal ones (few steps, more
bytes a step) for small messages, bandwidth-optimal ones (each byte sent once, many
steps) for large. Here every algorithm has its time on idle links in the alpha-beta
model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective
Communication Operations in MPICH", section 3) as the simulator's network charges it: a
message costs ``alpha`` (the route's latency) plus its serialisation at the sender's port
``ser(bytes)``, and a chip's port sends one message at a time. For ``p`` chips and ``S``
bytes:

| algorithm          | all-reduce                      | all-gather, reduce-scatter           |
|--------------------|---------------------------------|--------------------------------------|
| ring               | 2 (p-1) (alpha + ser(S/p))      | (p-1) (alpha + ser(S/p))             |
| direct             | 2 (alpha + (p-1) ser(S/p))      | alpha + (p-1) ser(S/p)               |
| one-shot           | alpha + (p-1) ser(S)            | (none: direct is the one-shot)       |
| recursive-doubling | log2 p (alpha + ser(S))         | sum_k alpha + ser(2^k S/p)           |

Ring (Patarasuk & Yuan 2009) runs on any link kind (it only talks to its neighbours);
the others send to any chip of the group in one hop, so they need direct links (fully
connected); recursive doubling (and halving, for reduce-scatter) needs ``p`` a power of
two. On a ring network only the ring applies; through a switch the ring is kept (each
step two hops).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mapping.systems import LinkKind

AUTO = "auto"  # the algorithm of least modelled time for the call's size


@dataclass(frozen=True)
class Algorithm:
    """A collective algorithm: the link kinds it runs on and whether it needs a power-of-two group."""

    name: str
    kinds: tuple[LinkKind, ...]
    pow2: bool
    ops: tuple[str, ...]
    doc: str

    def applies(self, op: str, kind: LinkKind, p: int) -> bool:
        return op in self.ops and kind in self.kinds and (not self.pow2 or p & (p - 1) == 0)


REDUCING = ("all_reduce", "all_gather", "reduce_scatter")
ANY = (LinkKind.RING, LinkKind.SWITCH, LinkKind.FULLY_CONNECTED)
DIRECT = (LinkKind.FULLY_CONNECTED,)

ALGORITHMS = {a.name: a for a in (  # in order of preference on equal time
    Algorithm("ring", ANY, False, REDUCING, "p - 1 steps (each way), S/p to the next chip a step"),
    Algorithm("direct", DIRECT, False, REDUCING, "S/p to every other chip at once (each phase)"),
    Algorithm("one-shot", DIRECT, False, ("all_reduce",), "all S to every other chip; each reduces alone"),
    Algorithm("recursive-doubling", DIRECT, True, REDUCING,
              "log2 p steps with the chip 2^k away; reduce-scatter halves instead"),
)}
NAMES = tuple(ALGORITHMS)


def closed_form(op: str, algorithm: str, p: int, nbytes: float, alpha: float, ser: Callable[[float], float]) -> float:
    """Time of ``op`` by ``algorithm`` over ``p`` chips on idle links (the table above)."""
    if p < 2:
        return 0.0
    piece = -(-int(nbytes) // p)
    if algorithm == "ring":
        return (2 if op == "all_reduce" else 1) * (p - 1) * (alpha + ser(piece))
    if algorithm == "direct":
        return (2 if op == "all_reduce" else 1) * (alpha + (p - 1) * ser(piece))
    if algorithm == "one-shot":
        return alpha + (p - 1) * ser(int(nbytes))
    if algorithm == "recursive-doubling":
        steps = int(math.log2(p))
        if op == "all_reduce":
            return steps * (alpha + ser(int(nbytes)))
        sizes = [piece << k for k in range(steps)] if op == "all_gather" else \
            [-(-int(nbytes) // (2 << k)) for k in range(steps)]
        return sum(alpha + ser(s) for s in sizes)
    raise ValueError(f"unknown collective algorithm {algorithm!r}; known: {', '.join(NAMES)}")


def choose(op: str, kind: LinkKind, p: int, nbytes: float, alpha: float, ser: Callable[[float], float]) -> str:
    """The applicable algorithm of least closed-form time (the first in ``ALGORITHMS`` on a tie)."""
    best, name = math.inf, "ring"
    for a in ALGORITHMS.values():
        if a.applies(op, kind, p):
            t = closed_form(op, a.name, p, nbytes, alpha, ser)
            if t < best:
                best, name = t, a.name
    return name


@dataclass(frozen=True)
class PortTiming:
    """One network dimension as its collectives see it, in cycles: a hop's latency, the port's
    bytes a cycle and the packet (through a switch a message takes two hops, the second adding
    the latency and one packet's serialisation: sim/system/network.py's cut-through)."""

    kind: LinkKind
    latency: int
    bytes_per_cycle: float
    packet_bytes: int

    @classmethod
    def of(cls, kind: LinkKind, bandwidth: float, latency: float, clock_hz: float, packet_bytes: int) -> "PortTiming":
        return cls(kind, max(1, round(latency * clock_hz)), bandwidth / clock_hz, packet_bytes)

    def ser(self, nbytes: float) -> int:
        """Cycles a message of ``nbytes`` holds the port (at least one)."""
        return max(1, math.ceil(nbytes / self.bytes_per_cycle))

    def alpha(self, op: str, p: int, nbytes: int) -> int:
        """A step's latency: the ring's message is ``S / p``, the packet no larger than it."""
        if self.kind is not LinkKind.SWITCH:
            return self.latency
        return 2 * self.latency + self.ser(min(self.packet_bytes, -(-int(nbytes) // max(p, 1))))

    def cycles(self, op: str, algorithm: str, p: int, nbytes: int) -> int:
        return round(closed_form(op, algorithm, p, nbytes, self.alpha(op, p, nbytes), self.ser))

    def choose(self, op: str, p: int, nbytes: int) -> str:
        return choose(op, self.kind, p, nbytes, self.alpha(op, p, nbytes), self.ser)

"""The inter-chip network: links with serialisation and latency, switch ports with queues.

A message of ``S`` bytes goes the route mapping/topology.py gives it. At every node it
waits for the egress port its next link leaves by (first come first served: a chip has
one port per network dimension, shared by that dimension's links; a switch one per link)
and holds it for ``ceil(S / bytes per cycle)`` cycles; its packets stream back to back,
so its head reaches the next node one packet and the link's latency after it started
(``packet_bytes``: cut-through at packet granularity) and its tail the latency after it
finished. A relaying node may forward the head at once but cannot finish before the tail
has arrived and its last packet passed. The destination gets the message when its tail
arrives. Uncontended, one hop costs ``latency + S / B``; each further hop adds ``latency
+ packet / B``. Time is in cycles of the chips' clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mapping.topology import SystemGraph


@dataclass(frozen=True)
class LinkTiming:
    """One link in cycles."""

    src: int
    dst: int
    bytes_per_cycle: float
    latency: int  # cycles
    port: int  # egress port it leaves by


@dataclass(slots=True)
class Transit:
    """A message on its way: where it is and when its head and tail got there."""

    msg: int  # message id
    src: int  # source chip
    dst: int  # destination chip
    nbytes: int
    tag: int
    hop: int  # index into its route of the link it takes next
    head: int  # cycle its head reached the current node
    tail: int  # cycle its tail reached it
    payload: tuple | None = None  # a grid chip's message (sim/chip/messages.py FIELDS), None between boxes

    def row(self) -> tuple:
        return (self.msg, self.src, self.dst, self.nbytes, self.tag, self.hop, self.head, self.tail)


class SystemNet:
    """Link timing and routes of a system (static; the shard keeps the ports' state)."""

    def __init__(self, graph: SystemGraph, clock_hz: float, packet_bytes: int):
        self.graph = graph
        self.packet_bytes = packet_bytes
        ports: dict[tuple[int, int], int] = {}  # (node, dim) for chips, (node, -1 - link) for switches
        timings = []
        for i, link in enumerate(graph.links):
            key = (link.src, link.dim) if link.src < graph.chips else (link.src, -1 - i)
            port = ports.setdefault(key, len(ports))
            timings.append(LinkTiming(link.src, link.dst, link.bandwidth / clock_hz,
                                      max(1, round(link.latency * clock_hz)), port))
        self.links = tuple(timings)
        self.ports = len(ports)
        self._routes: dict[tuple[int, int], tuple[int, ...]] = {}

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        key = (src, dst)
        r = self._routes.get(key)
        if r is None:
            r = self._routes[key] = tuple(self.graph.route(src, dst))
        return r

    def cycles(self, link: int, nbytes: int) -> int:
        """Cycles a message holds a link's port."""
        return max(1, math.ceil(nbytes / self.links[link].bytes_per_cycle))

    def lookahead(self, links) -> int:
        """Least cycles between a node sending on any of ``links`` and the far node hearing of it."""
        return min((self.links[i].latency for i in links), default=0)

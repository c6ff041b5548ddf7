"""One shard of a system: some of its nodes (chips and switches) and the links that leave them.

Everything a shard owns runs from one event heap, ordered by (cycle, class: deliveries,
then messages moving on, then tasks resuming; node; then the message id and hop, or the
chip's own sequence), never by the order events were pushed, so any cut gives the same run: messages moving hop by hop through the network (sim/system/network.py)
and chips running their programs. A chip here is a box: its program's compute is a time
on its one pipeline (``Compute``), and it talks to other chips only through messages
(``send``, ``Recv``). A message whose next node belongs to another shard leaves as
boundary traffic; its head cannot get there before the link's latency has passed, which
is the lookahead (every epoch is at most the latency of the links the cut crosses).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from sim.system.network import SystemNet, Transit

DELIVER, ARRIVE, RESUME = 0, 1, 2
_E = np.zeros(0, dtype=np.int64)


@dataclass
class Compute:
    """Occupy the chip's pipeline for ``cycles`` (after whatever it is computing already)."""

    cycles: int


@dataclass
class Sleep:
    cycles: int


@dataclass
class Recv:
    """Wait for the messages ``(source chip, tag)`` (each once); the task gets their sizes."""

    keys: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A span of a chip's program: a micro-batch stage, a collective, ... (a run's records)."""

    kind: str
    chip: int
    ident: int
    start: int
    end: int
    nbytes: int

    def row(self) -> tuple:
        return (self.kind, self.chip, self.ident, self.start, self.end, self.nbytes)


_COLUMNS = ("node", "msg", "src", "dst", "nbytes", "tag", "hop", "head", "tail")


@dataclass
class SystemBoundary:
    """Messages crossing to nodes of other shards, as int64 columns (``node``: where they arrive)."""

    node: np.ndarray = field(default_factory=lambda: _E)
    msg: np.ndarray = field(default_factory=lambda: _E)
    src: np.ndarray = field(default_factory=lambda: _E)
    dst: np.ndarray = field(default_factory=lambda: _E)
    nbytes: np.ndarray = field(default_factory=lambda: _E)
    tag: np.ndarray = field(default_factory=lambda: _E)
    hop: np.ndarray = field(default_factory=lambda: _E)
    head: np.ndarray = field(default_factory=lambda: _E)
    tail: np.ndarray = field(default_factory=lambda: _E)

    SECTIONS: ClassVar[tuple[tuple[str, ...], ...]] = (_COLUMNS,)

    def __len__(self) -> int:
        return len(self.node)

    def earliest(self) -> float:
        return float(self.head.min()) if len(self.head) else float("inf")

    def flit_count(self) -> int:
        return int(self.nbytes.sum())

    def sections(self) -> list[list[np.ndarray]]:
        return [[getattr(self, n) for n in _COLUMNS]]

    @classmethod
    def from_sections(cls, sections: list[list[np.ndarray]]) -> "SystemBoundary":
        return cls(*sections[0])

    @classmethod
    def empty(cls) -> "SystemBoundary":
        return cls()

    @classmethod
    def from_rows(cls, rows: list[tuple]) -> "SystemBoundary":
        if not rows:
            return cls()
        a = np.array(rows, dtype=np.int64).reshape(-1, len(_COLUMNS))
        return cls(*(np.ascontiguousarray(a[:, i]) for i in range(len(_COLUMNS))))

    @classmethod
    def concat(cls, parts: list["SystemBoundary"]) -> "SystemBoundary":
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, n) for p in parts]) for n in _COLUMNS))

    def select(self, mask: np.ndarray) -> "SystemBoundary":
        return SystemBoundary(*(getattr(self, n)[mask] for n in _COLUMNS))


class BoxChip:
    """A chip as a box: one compute pipeline, a mailbox, and its program's tasks."""

    def __init__(self, cid: int, shard: "SystemShard"):
        self.cid = cid
        self.shard = shard
        self.busy_until = 0
        self.sent = 0
        self.seq = 0
        self.mailbox: dict[tuple[int, int], list[int]] = {}  # (src, tag) -> sizes of messages not yet taken
        self.waiting: dict[tuple[int, int], tuple] = {}  # (src, tag) -> (task, Recv, got)
        self.compute_cycles = 0
        self.state: dict = {}

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def send(self, dst: int, nbytes: int, tag: int) -> None:
        """Post a message to chip ``dst`` (the network takes it from now on)."""
        self.sent += 1
        self.shard.inject(self, dst, int(nbytes), tag)

    def spawn(self, task) -> None:
        if task is not None:
            self._resume(task, None)

    def deliver(self, src: int, nbytes: int, tag: int) -> None:
        key = (src, tag)
        entry = self.waiting.pop(key, None)
        if entry is None:
            self.mailbox.setdefault(key, []).append(nbytes)
            return
        task, w, got = entry
        got[key] = nbytes
        if len(got) == len(w.keys):
            self._resume(task, got)

    def _resume(self, task, value) -> None:
        shard = self.shard
        while True:
            try:
                w = task.send(value)
            except StopIteration:
                return
            if type(w) is Compute:
                start = max(shard.now, self.busy_until)
                self.busy_until = start + max(0, w.cycles)
                self.compute_cycles += max(0, w.cycles)
                shard.at(self.busy_until, self, task)
                return
            if isinstance(w, Sleep):
                shard.at(shard.now + max(0, w.cycles), self, task)
                return
            if isinstance(w, Recv):
                got: dict = {}
                for key in w.keys:
                    box = self.mailbox.get(key)
                    if box:
                        got[key] = box.pop(0)
                        if not box:
                            del self.mailbox[key]
                if len(got) == len(w.keys):
                    value = got
                    continue
                for key in w.keys:
                    if key not in got:
                        self.waiting[key] = (task, w, got)
                return
            raise TypeError(f"a chip task yielded {w!r}; expected Compute, Sleep or Recv")


class SystemShard:
    """The nodes of one shard of a system, their outgoing links' ports, and one event heap."""

    def __init__(self, net: SystemNet, nodes: list[int], program, owner: np.ndarray):
        self.net = net
        self.nodes = set(nodes)
        self.owner = owner  # node -> shard index
        self.program = program
        self.heap: list = []
        self.now = 0
        self.t = 0
        self.port_free = [0] * net.ports  # plain lists: scalar updates are the hot path
        self.link_bytes = [0] * len(net.links)
        # per link: (far node, bytes per cycle, latency, port)
        self._links = [(lk.dst, lk.bytes_per_cycle, lk.latency, lk.port) for lk in net.links]
        self._packet = net.packet_bytes
        self.chips = {c: BoxChip(c, self) for c in sorted(nodes) if c < net.graph.chips}
        self.records: list[StepRecord] = []
        self.messages = 0
        self.bytes_sent = 0
        self.counts = {"created": 0, "finished": 0}
        self._out: list[tuple] = []
        for chip in self.chips.values():
            task = program.start(chip)
            if task is not None:
                self.at(0, chip, task)

    # ------------------------------------------------------------------ services
    def at(self, cycle: int, chip: BoxChip, task) -> None:
        heapq.heappush(self.heap, (cycle, RESUME, chip.cid, chip.next_seq(), task))

    @staticmethod
    def _key(tr: Transit) -> int:
        return (tr.msg << 6) | tr.hop

    def record(self, kind: str, chip: int, ident: int, start: int, end: int, nbytes: int = 0) -> None:
        self.records.append(StepRecord(kind, chip, ident, start, end, nbytes))

    def inject(self, chip: BoxChip, dst: int, nbytes: int, tag: int) -> None:
        self.messages += 1
        self.bytes_sent += nbytes
        msg = (chip.cid << 32) | chip.sent
        if dst == chip.cid:  # to itself: no network
            tr = Transit(msg, chip.cid, dst, nbytes, tag, 0, self.now, self.now)
            heapq.heappush(self.heap, (self.now, DELIVER, dst, self._key(tr), tr))
            return
        self._arrive(chip.cid, Transit(msg, chip.cid, dst, nbytes, tag, 0, self.now, self.now))

    def _arrive(self, node: int, tr: Transit) -> None:
        """A message's head has reached ``node``: forward it (its next link's port permitting)."""
        route = self.net.route(tr.src, tr.dst)
        link = route[tr.hop]
        dst, bpc, lat, port = self._links[link]
        n = tr.nbytes
        hold = -(-n // bpc) if n > 0 else 1
        pkt = -(-min(n, self._packet) // bpc) if n > 0 else 1
        start = tr.head if tr.head > self.port_free[port] else self.port_free[port]
        end = start + hold if start + hold > tr.tail + pkt else tr.tail + pkt
        self.port_free[port] = end
        self.link_bytes[link] += n
        nxt = Transit(tr.msg, tr.src, tr.dst, n, tr.tag, tr.hop + 1, int(start + pkt + lat), int(end + lat))
        if dst not in self.nodes:
            self._out.append((dst, *nxt.row()))
        elif nxt.hop == len(route):
            heapq.heappush(self.heap, (nxt.tail, DELIVER, dst, (nxt.msg << 6) | nxt.hop, nxt))
        else:
            heapq.heappush(self.heap, (nxt.head, ARRIVE, dst, (nxt.msg << 6) | nxt.hop, nxt))

    # ------------------------------------------------------------------ epoch API
    def advance(self, t0: int, t1: int, inbound: SystemBoundary | None = None) -> SystemBoundary:
        if t0 < self.t:
            raise ValueError(f"system shard already at cycle {self.t}, cannot restart at {t0}")
        if inbound is not None and len(inbound):
            self.deliver(inbound)
        heap, pop = self.heap, heapq.heappop
        while heap and heap[0][0] < t1:
            cycle, kind, node, _, item = pop(heap)
            self.now = cycle
            if kind == RESUME:
                self.chips[node]._resume(item, None)
            elif kind == ARRIVE:
                self._arrive(node, item)
            else:
                self.chips[node].deliver(item.src, item.nbytes, item.tag)
        self.t = t1
        out = SystemBoundary.from_rows(self._out)
        self._out = []
        if len(out) and out.earliest() < t1:
            raise RuntimeError(f"a message reaches another shard at cycle {out.earliest():.0f}, inside the epoch "
                               f"ending at {t1}: the epoch is longer than the lookahead")
        return out

    def deliver(self, b: SystemBoundary) -> None:
        """Messages arriving from other shards (each at its node, due at its head's arrival)."""
        route_len = self.net.route
        for row in zip(*(getattr(b, n).tolist() for n in _COLUMNS)):
            node, msg, src, dst, nbytes, tag, hop, head, tail = row
            tr = Transit(msg, src, dst, nbytes, tag, hop, head, tail)
            if hop == len(route_len(src, dst)):
                heapq.heappush(self.heap, (tail, DELIVER, node, self._key(tr), tr))
            else:
                heapq.heappush(self.heap, (head, ARRIVE, node, self._key(tr), tr))

    def next_event(self) -> float:
        return float(self.heap[0][0]) if self.heap else float("inf")

    def counters(self) -> tuple[int, int]:
        return self.counts["created"], self.counts["finished"]

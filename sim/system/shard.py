"""One shard of a system: some of its nodes (chips and switches) and the links that leave them.

Everything a shard owns runs from one event heap, ordered by (cycle, class: deliveries,
then messages moving on, then tasks resuming; node; then the message id and hop, or the
chip's own sequence), never by the order events were pushed, so any cut gives the same
run: messages moving hop by hop through the network (sim/system/network.py) and chips
running their programs. A chip here is a box: its program's compute is a time
on its one pipeline (``Compute``), and it talks to other chips only through messages
(``send``, ``Recv``). A message whose next node belongs to another shard leaves as
boundary traffic; its head cannot get there before the link's latency has passed, which
is the lookahead (every epoch is at most the latency of the links the cut crosses).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from sim.chip.messages import FIELDS
from sim.system.grid import GridChip
from sim.system.network import SystemNet, Transit
from sim.system.records import StepRecord
from sim.tasks import PARKED, TaskDispatch
from sim.traffic import Columnar, column, matrix

DELIVER, ARRIVE, RESUME = 0, 1, 2


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


_NF = len(FIELDS)


_NO_DATA = (0,) * _NF  # a box message's payload row without data (its first element 0; 1 marks data)


def box_payload(data: tuple[int, ...]) -> tuple[int, ...] | None:
    """A box message's data (at most FIELDS - 1 integers) as a payload row, None without data."""
    if not data:
        return None
    if len(data) > _NF - 1:
        raise ValueError(f"a box message carries at most {_NF - 1} integers, got {len(data)}")
    return (1, *data) + (0,) * (_NF - 1 - len(data))


class SystemBoundary(Columnar):
    """Messages crossing to nodes of other shards, as int64 columns (``node``: where they arrive)."""

    node: np.ndarray = column("transits")
    msg: np.ndarray = column("transits")
    src: np.ndarray = column("transits")
    dst: np.ndarray = column("transits")
    nbytes: np.ndarray = column("transits", flits="value")
    tag: np.ndarray = column("transits")
    hop: np.ndarray = column("transits")
    head: np.ndarray = column("transits", due=True)
    tail: np.ndarray = column("transits")
    # [n, FIELDS] between grid chips, else no rows; keyword-only: the columns above come positionally
    payload: np.ndarray = matrix(FIELDS, kw_only=True)

    @classmethod
    def from_rows(cls, rows: list[tuple], payloads: list[tuple] | None = None) -> "SystemBoundary":
        """Transit rows (node first) and, between grid chips, each one's message row."""
        if not rows:
            return cls()
        a = np.array(rows, dtype=np.int64).reshape(-1, len(_COLUMNS))
        pay = np.array(payloads, dtype=np.int64).reshape(-1, _NF) if payloads else np.zeros((0, _NF), dtype=np.int64)
        return cls(**{n: np.ascontiguousarray(a[:, i]) for i, n in enumerate(_COLUMNS)}, payload=pay)

    def transits(self):
        """(node, Transit) of every message in it."""
        pay = self.payload.tolist() if len(self.payload) else None
        for i, row in enumerate(zip(*(getattr(self, n).tolist() for n in _COLUMNS))):
            yield row[0], Transit(*row[1:], payload=tuple(pay[i]) if pay is not None else None)


_COLUMNS = SystemBoundary.columns("transits")


@dataclass
class SystemResult:
    """What a finished system shard hands back."""

    end_cycle: int
    records: list[StepRecord]
    link_bytes: np.ndarray  # bytes each link carried (links the shard owns)
    messages: int
    bytes_sent: int
    compute: dict[int, int]  # chip -> cycles computed
    chips: dict = field(default_factory=dict)  # grid fidelity: chip -> its ShardResult (sim/chip/report.py)
    work: tuple[int, int] = (0, 0)  # work items (collectives, stages, steps, requests) started and finished
    logged: list = field(default_factory=list)  # the program's views, not hashed (a serve-system run's anchors)


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
        self.data: dict[tuple[int, int], list[tuple[int, ...]]] = {}  # (src, tag) -> data of messages carrying it
        self.compute_cycles = 0
        self.state: dict = {}

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def send(self, dst: int, nbytes: int, tag: int, data: tuple[int, ...] = ()) -> None:
        """Post a message to chip ``dst`` (the network takes it from now on); ``data``: a few integers it
        carries (what a command says), read by the receiver with ``take_data`` once it has it."""
        self.sent += 1
        self.shard.inject(self, dst, int(nbytes), tag, box_payload(data))

    def take_data(self, src: int, tag: int) -> tuple[int, ...]:
        """The data of the first message received from ``src`` with ``tag`` that carried some."""
        box = self.data[src, tag]
        out = box.pop(0)
        if not box:
            del self.data[src, tag]
        return out

    def spawn(self, task) -> None:
        if task is not None:
            self._resume(task, None)

    def deliver(self, src: int, nbytes: int, tag: int, payload: tuple | None = None) -> None:
        key = (src, tag)
        if payload is not None and payload[0] == 1:
            self.data.setdefault(key, []).append(tuple(payload[1:]))
        entry = self.waiting.pop(key, None)
        if entry is None:
            self.mailbox.setdefault(key, []).append(nbytes)
            return
        task, w, got = entry
        got[key] = nbytes
        if len(got) == len(w.keys):
            self._resume(task, got)

    def _resume(self, task, value) -> None:
        CHIP_TASKS.run(self, task, value)

    def _compute(self, task, w: Compute):
        shard = self.shard
        start = max(shard.now, self.busy_until)
        self.busy_until = start + max(0, w.cycles)
        self.compute_cycles += max(0, w.cycles)
        shard.at(self.busy_until, self, task)
        return PARKED

    def _sleep(self, task, w: Sleep):
        self.shard.at(self.shard.now + max(0, w.cycles), self, task)
        return PARKED

    def _recv(self, task, w: Recv):
        got: dict = {}
        for key in w.keys:
            box = self.mailbox.get(key)
            if box:
                got[key] = box.pop(0)
                if not box:
                    del self.mailbox[key]
        if len(got) == len(w.keys):
            return got
        for key in w.keys:
            if key not in got:
                self.waiting[key] = (task, w, got)
        return PARKED


CHIP_TASKS: TaskDispatch[BoxChip] = TaskDispatch(
    "a chip task", {Compute: BoxChip._compute, Sleep: BoxChip._sleep, Recv: BoxChip._recv})


class SystemShard:
    """The nodes of one shard of a system, their outgoing links' ports, and one event heap."""

    def __init__(self, net: SystemNet, nodes: list[int], program, owner: np.ndarray, grid=None):
        """``program``: the box chips' program; ``grid``: chip id -> ChipConfig for grid-fidelity chips."""
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
        chip_ids = [c for c in sorted(nodes) if c < net.graph.chips]
        self.grid = {c: GridChip(c, grid(c)) for c in chip_ids} if grid is not None else {}
        self.chips = {c: BoxChip(c, self) for c in chip_ids} if grid is None else {}
        self.records: list[StepRecord] = []
        self.logged: list = []  # log()
        self.messages = 0
        self.bytes_sent = 0
        self.counts = {"created": 0, "finished": 0}
        self._out: list[tuple] = []
        self._out_payload: list[tuple] = []
        # box chips whose messages may carry data (a serve-system run's step commands): every message
        # leaving the shard then has a payload row, so a boundary's rows and payloads stay aligned
        self.box_data = not self.grid and bool(getattr(program, "BOX_DATA", False))
        self._arrivals: list[tuple] = []  # (tail, grid chip, message key, Transit) due at grid chips
        self._least_latency = float("inf")  # of a link leaving this shard's nodes (watch_cut)
        for chip in self.chips.values():
            task = program.start(chip) if program is not None else None
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

    def log(self, view) -> None:
        """Keep a record of the program's that the result hash does not cover (a view: how an
        anchor was simulated and how long it took), handed back with the shard's result."""
        self.logged.append(view)

    def inject(self, chip: BoxChip, dst: int, nbytes: int, tag: int, payload: tuple | None = None) -> None:
        if payload is not None and not self.box_data:
            raise RuntimeError("a box message carries data in a run whose program does not say BOX_DATA")
        self.messages += 1
        self.bytes_sent += nbytes
        msg = (chip.cid << 32) | chip.sent
        if dst == chip.cid:  # to itself: no network
            tr = Transit(msg, chip.cid, dst, nbytes, tag, 0, self.now, self.now, payload)
            heapq.heappush(self.heap, (self.now, DELIVER, dst, self._key(tr), tr))
            return
        self._arrive(chip.cid, Transit(msg, chip.cid, dst, nbytes, tag, 0, self.now, self.now, payload))

    def _arrive(self, node: int, tr: Transit) -> None:
        """A message's head has reached ``node``: forward it (its next link's port permitting)."""
        route = self.net.route(tr.src, tr.dst)
        link = route[tr.hop]
        dst, bpc, lat, port = self._links[link]
        n = tr.nbytes
        # cycles (ints; bytes per cycle is a float): the link is held, and a packet's serialisation
        hold = int(-(-n // bpc)) if n > 0 else 1
        pkt = int(-(-min(n, self._packet) // bpc)) if n > 0 else 1
        start = tr.head if tr.head > self.port_free[port] else self.port_free[port]
        end = start + hold if start + hold > tr.tail + pkt else tr.tail + pkt
        self.port_free[port] = end
        self.link_bytes[link] += n
        nxt = Transit(tr.msg, tr.src, tr.dst, n, tr.tag, tr.hop + 1, int(start + pkt + lat), int(end + lat),
                      tr.payload)
        if dst not in self.nodes:
            self._out.append((dst, *nxt.row()))
            if nxt.payload is not None:
                self._out_payload.append(nxt.payload)
            elif self.box_data:  # box messages carrying data leave with the others: every row has one
                self._out_payload.append(_NO_DATA)
        elif nxt.hop == len(route) and self.grid:
            self._to_grid(dst, nxt)
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
        if self._arrivals:
            self._hand_over_arrivals()
        for cid, chip in self.grid.items():  # chips first: what they hand over enters the network in time order
            for msg in chip.advance(t0, t1):
                tr = Transit((cid << 48) | msg.msg, cid, msg.chip, msg.nbytes, msg.tag, 0, msg.sent, msg.sent,
                             msg.row())
                self.messages += 1
                self.bytes_sent += msg.nbytes
                heapq.heappush(self.heap, (msg.sent, ARRIVE, cid, self._key(tr), tr))
        heap, pop = self.heap, heapq.heappop
        while heap and heap[0][0] < t1:
            cycle, kind, node, _, item = pop(heap)
            self.now = cycle
            if kind == RESUME:
                self.chips[node]._resume(item, None)
            elif kind == ARRIVE:
                self._arrive(node, item)
            else:
                self.chips[node].deliver(item.src, item.nbytes, item.tag, item.payload)
        self.t = t1
        out = SystemBoundary.from_rows(self._out, self._out_payload)
        self._out, self._out_payload = [], []
        if len(out) and out.earliest() < t1:
            raise RuntimeError(f"a message reaches another shard at cycle {out.earliest():.0f}, inside the epoch "
                               f"ending at {t1}: the epoch is longer than the lookahead")
        return out

    def deliver(self, b: SystemBoundary) -> None:
        """Messages arriving from other shards (each at its node, due at its head's arrival)."""
        route = self.net.route
        for node, tr in b.transits():
            if tr.hop == len(route(tr.src, tr.dst)):
                if self.grid:
                    self._to_grid(node, tr)
                else:
                    heapq.heappush(self.heap, (tr.tail, DELIVER, node, self._key(tr), tr))
            else:
                heapq.heappush(self.heap, (tr.head, ARRIVE, node, self._key(tr), tr))

    def _to_grid(self, node: int, tr: Transit) -> None:
        """A message's tail will reach grid chip ``node`` (in a later epoch: an epoch is at most a link's
        latency); it is handed over at the next epoch's start, with the others, in a fixed order."""
        self._arrivals.append((tr.tail, node, self._key(tr), tr))

    def _hand_over_arrivals(self) -> None:
        """Every message due at this shard's grid chips, in the order (tail, chip, message id, hop): one
        chip's IO unit takes same-cycle arrivals in that order however the chips are grouped into shards
        (they come from this shard's own links or from another shard's)."""
        arrivals, self._arrivals = sorted(self._arrivals, key=lambda a: a[:3]), []
        for tail, node, _, tr in arrivals:
            last = self.net.route(tr.src, tr.dst)[-1]
            assert tr.payload is not None
            self.grid[node].arrive(tail, self.net.graph.links[last].dim, tr.payload)

    def next_event(self) -> float:
        t = float(self.heap[0][0]) if self.heap else float("inf")
        return min([t, *(float(a[0]) for a in self._arrivals), *(c.next_event() for c in self.grid.values())])

    def watch_cut(self) -> None:
        """Get ready for ``earliest_output`` (the system is cut into shards)."""
        self._least_latency = float(min((lk.latency for lk in self.net.links if lk.src in self.nodes),
                                        default=float("inf")))
        for chip in self.grid.values():
            chip.watch_io()

    def earliest_output(self) -> np.ndarray:
        """Per shard, the earliest cycle anything this shard holds could reach a node of it, or
        (this shard's own entry) a grid chip of its own, which must get it in a later epoch: what
        could next leave one of its nodes (a message's next hop, a box chip's task resuming, a grid
        chip's IO unit handing a message over, a message due at a grid chip answered at once) plus
        the least latency of a link leaving them. Every hop takes at least its link's latency."""
        t = float(self.heap[0][0]) if self.heap else float("inf")
        if self._arrivals:
            t = min(t, min(float(a[0]) for a in self._arrivals))
        for chip in self.grid.values():
            t = min(t, chip.earliest_hand_over())
        return np.full(int(self.owner.max()) + 1, t + self._least_latency)

    def report(self) -> SystemResult:
        compute = {c: ch.compute_cycles for c, ch in self.chips.items()}
        chips = {c: ch.result() for c, ch in self.grid.items()}
        compute.update({c: r.compute_cycles for c, r in chips.items()})
        end = max([self.now, *(r.end_cycle for r in chips.values())])
        return SystemResult(end, list(self.records), np.array(self.link_bytes, dtype=np.int64), self.messages,
                            self.bytes_sent, compute, chips, self.counters(), list(self.logged))

    def counters(self) -> tuple[int, int]:
        if self.grid:
            pairs = [c.counters() for c in self.grid.values()]
            return sum(a for a, _ in pairs), sum(f for _, f in pairs)
        return self.counts["created"], self.counts["finished"]

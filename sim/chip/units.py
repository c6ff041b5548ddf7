"""Units and the compute unit's task runtime.

Every unit belongs to one chip shard and talks to other units only through messages
(``send``/``request``). A compute unit runs workload tasks written as generators that
yield what they wait for: ``Sleep(n)``, ``Compute(n)`` (the CU's pipeline is one resource,
so compute phases of concurrent tasks queue) and ``Replies(tags, reason)`` (the replies to
requests it sent); sim/tasks.py's dispatcher hands each to its handler here. Waiting time
is accounted by reason ("sync" for reference-count acknowledgements and weight grants,
"memory" for allocations and data, "control" for the scheduler), which gives the run's
synchronisation cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.chip.messages import ACK, POSTED, READ_RESP, Message
from sim.tasks import PARKED, TaskDispatch

REPLY_KINDS = frozenset({ACK, READ_RESP})


class Unit:
    """State shared by every unit: identity, the shard it runs in, its event counter."""

    def __init__(self, uid: int, tile: int, shard):
        self.uid = uid
        self.tile = tile
        self.shard = shard
        self.seq = 0  # orders this unit's own timers and log entries
        self.sent = 0  # messages sent (message ids)
        self.tags = 0  # request tags
        self.state: dict = {}  # the workload program's per-unit state

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def send(self, kind: int, dst: int, ready: int | list[int] | None = None, **fields) -> Message:
        """Queue a message (at the network interface from cycle ``ready``, default now; a list
        gives each packet of a long message its own cycle)."""
        return self.shard.send(self, kind, dst, ready, **fields)

    def request(self, kind: int, dst: int, ready: int | list[int] | None = None, **fields) -> int:
        """Send a message whose reply carries a fresh tag; returns the tag."""
        self.tags += 1
        self.shard.send(self, kind, dst, ready, tag=self.tags, **fields)
        return self.tags

    def on_message(self, msg: Message) -> None:  # pragma: no cover - every unit overrides
        raise NotImplementedError


@dataclass
class Sleep:
    cycles: int


@dataclass
class Compute:
    """Hold the CU's pipeline for ``cycles``; ``lanes`` of its SIMD lanes do work (0: all of
    them), which is what its energy counts. Work spread over ``cus`` CUs of which only this
    one is simulated holds it for its share of the cycles and counts the energy of all ``cus``."""

    cycles: int
    lanes: int = 0
    cus: int = 1


@dataclass
class Replies:
    """Wait for the replies carrying ``tags`` (or, with ``first``, for whichever comes
    first); the task receives {tag: message} of those that arrived."""

    tags: list[int]
    reason: str = "memory"
    first: bool = False
    got: dict = field(default_factory=dict)
    left: int = 0
    since: int = 0


class ComputeUnit(Unit):
    """A CU: runs the workload program's tasks; its pipeline executes one phase at a time."""

    def __init__(self, uid: int, tile: int, shard, program):
        super().__init__(uid, tile, shard)
        self.program = program
        self.busy_until = 0
        self.waiting: dict[int, tuple] = {}  # tag -> (task, Replies)
        self.early: dict[int, Message] = {}  # replies that arrived before their task waited
        self.wait_cycles: dict[str, int] = {}
        self.compute_cycles = 0
        self.lanes = shard.cfg.spec.cu_lanes
        self.lane_cycles = 0  # compute cycles x lanes used

    def spawn(self, task) -> None:
        if task is not None:
            self._resume(task, None)

    def on_message(self, msg: Message) -> None:
        if msg.kind not in REPLY_KINDS and not msg.flags & POSTED:
            self.spawn(self.program.on_message(self, msg))
            return
        entry = self.waiting.pop(msg.tag, None)
        if entry is None:
            self.early[msg.tag] = msg
            return
        task, w = entry
        w.got[msg.tag] = msg
        w.left -= 1
        if w.left == 0 or w.first:
            for t in w.tags:  # replies still to come go to ``early``
                self.waiting.pop(t, None)
            self._waited(w)
            self._resume(task, w.got)

    def signal(self, tag: int) -> None:
        """Hand ``tag`` to the task of this CU waiting for it (now, or whenever it waits): one
        task of a CU telling another that its part is done."""
        self.on_message(Message(0, ACK, self.uid, self.uid, tag=tag, sent=self.shard.now))

    def arrived(self, tag: int) -> Message | None:
        """The reply carrying ``tag`` if it came while no task waited for it (taken)."""
        return self.early.pop(tag, None)

    def _waited(self, w: Replies) -> None:
        now = self.shard.now
        d = now - w.since
        if d > 0:
            self.wait_cycles[w.reason] = self.wait_cycles.get(w.reason, 0) + d
            self.shard.trace_span(self.uid, f"wait {w.reason}", w.since, d, "wait")

    def _resume(self, task, value=None) -> None:
        CU_TASKS.run(self, task, value)

    def _wait_replies(self, task, w: Replies):
        for t in w.tags:
            m = self.early.pop(t, None)
            if m is not None:
                w.got[t] = m
        w.left = len(w.tags) - len(w.got)
        if w.left == 0 or (w.first and w.got):
            return w.got
        w.since = self.shard.now
        for t in w.tags:
            if t not in w.got:
                self.waiting[t] = (task, w)
        return PARKED

    def _compute(self, task, w: Compute):
        shard = self.shard
        start = max(shard.now, self.busy_until)
        self.busy_until = start + max(0, w.cycles)
        self.compute_cycles += max(0, w.cycles)
        lanes = min(w.lanes, self.lanes) if w.lanes > 0 else self.lanes
        self.lane_cycles += max(0, w.cycles) * lanes * max(1, w.cus)
        shard.trace_span(self.uid, "compute", start, w.cycles, "compute")
        shard.at(self.busy_until, self, self._resume, task)
        return PARKED

    def _sleep(self, task, w: Sleep):
        self.shard.at(self.shard.now + max(0, w.cycles), self, self._resume, task)
        return PARKED

    def sync_wait(self) -> int:
        return self.wait_cycles.get("sync", 0)


CU_TASKS: TaskDispatch[ComputeUnit] = TaskDispatch(
    "a task", {Sleep: ComputeUnit._sleep, Compute: ComputeUnit._compute, Replies: ComputeUnit._wait_replies})

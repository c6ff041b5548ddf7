"""memory.spill = "nearest": a buffer whose MU is full continues in blocks of other MUs.

The dynamic-memory proposal's future direction (a buffer's virtual space spread over several
MUs) under the ``virtual`` policy. The buffer's own MU (its home) keeps its block table; an
entry for a block elsewhere is a reference in the proposal's format, (MU id, buffer id,
virtual index): the buffer id of a *guest* buffer the other MU holds for it (label
``spilled``), the virtual index the block's place among that MU's blocks of the buffer.

Everything between MUs is a message over the simulated NoC (so it is timed, loaded, and the
same for any shard count):

- Room. When an allocation or a growth does not fit, the home MU maps what its own free
  blocks hold, then asks the other MUs, nearest first (NoC hops from the home MU, then MU
  id), one at a time: a CONTROL ``CTRL_SPILL`` asks for the blocks still missing, the ACK
  grants as many as that MU has (its guest buffer is created or grown). When every MU has
  been asked and blocks are still missing, the request is out of memory (memory.on_oom;
  an allocation gives back what it had found, ``CTRL_RETURN``; a growth keeps it). An MU
  that could not grant all it was asked for sends ``CTRL_ROOM`` to the asker when it next
  frees room, which retries its stalled requests (as a free at the home MU does). Blocks
  given back are not new room: they wake only the MUs refused while they were lent, and of
  those only MUs of lower id than the one giving them back (a fixed order: two allocations
  that cannot both fit would otherwise take turns waking each other for ever).
- Data. Bytes that land in a remote block go there as a WRITE to the guest buffer, sent
  once the home MU has looked its block table up.
- Reads. The home MU answers every read (a reader's request is answered once, by the MU
  its reference names): it reads its own blocks, sends a READ_REQ for each other MU's
  blocks, and answers when all parts are in.
- Frees. Freeing (or truncating) the buffer frees (truncates) its guest buffers.

Translation cost: a block elsewhere costs the home MU's block-table lookup
(``translation_latency``) plus ``REMOTE_LOOKUP`` cycle(s) to decode the entry's reference and
form the request, before the request leaves; the other MU then pays its own access and
lookup. At zero load a read of a buffer held wholly on MU R costs, beyond the same read at
the home MU, ``translation_latency + REMOTE_LOOKUP + NI_LATENCY`` plus the zero-load
latencies of the request to R and of R's response back (tests/sim/memory/test_spill.py).

The home MU counts a guest buffer as a reference it holds: the other MU logs its allocation
and free to the shadow oracle, the home MU the drop, so a block left behind is a leak and a
block used after its free a use after free, under any reclamation protocol.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from sim.chip import messages as m
from sim.chip.records import BufferRecord, MuStats, buffer_label
from sim.chip.references import Ref
from sim.memory import oracle
from sim.memory.policies import Storage, largest_buffer
from sim.memory.policies.virtual import LOCAL, VirtualStorage

SPILLED = buffer_label(9, "spilled")  # a guest buffer: blocks an MU holds for another MU's buffer
REMOTE_LOOKUP = 1  # cycles: decode a block-table entry naming another MU and form its request


def spills(cfg) -> bool:
    """The run spreads buffers over MUs (memory.spill = nearest under the virtual policy)."""
    return cfg.policy.spills


def nearest_mus(cfg, lay, uid: int) -> list[int]:
    """Every other MU, nearest first: NoC hops from MU ``uid``, then MU id."""
    mus = lay.mus[lay.mus != uid]
    hops = cfg.noc.grid.hops(int(lay.tile[uid]), lay.tile[mus])
    return [int(u) for u in mus[np.lexsort((mus, hops))]]


class SpillingMU(Protocol):
    """What spilling uses of its MU (``sim.chip.memory_unit.MemoryUnit`` is one): its place and
    configuration, its buffers, its messages, and the hooks that open, size, free and retry.
    Declared here, since the MU builds its ``Spill`` and hands it the requests that reach other MUs."""

    @property
    def uid(self) -> int: ...

    @property
    def cfg(self) -> Any: ...

    @property
    def shard(self) -> Any: ...

    @property
    def storage(self) -> Storage: ...

    @property
    def stats(self) -> MuStats: ...

    @property
    def dram(self) -> int: ...

    @property
    def weight_field(self) -> int: ...

    @property
    def table(self) -> dict[int, BufferRecord]: ...

    @property
    def stalled(self) -> deque[tuple[m.Message, int]]: ...

    @property
    def handlers(self) -> Mapping[int, Callable[[m.Message, bool], object]]: ...

    def send(self, kind: int, dst: int, ready: int | list[int] | None = ..., **fields: Any) -> m.Message: ...

    def request(self, kind: int, dst: int, ready: int | list[int] | None = ..., **fields: Any) -> int: ...

    def reply(self, msg: m.Message, kind: int = ..., ready: int | list[int] | None = ..., **fields: Any) -> None: ...

    def lookup(self, msg: m.Message) -> BufferRecord | None: ...

    def release(self, rec: BufferRecord, how: str) -> None: ...

    def unstall_first(self) -> None: ...

    def _serve(self, nbytes: int) -> tuple[int, int]: ...

    def _delta(self, used: int, reserved: int) -> None: ...

    def _open(self, buf: int, owner: int, label: int, reserved: int) -> BufferRecord: ...

    def _free_id(self) -> int: ...

    def _let_go(self, buf: int) -> int: ...

    def _out_of_memory(self, msg: m.Message, retry: bool) -> bool: ...

    def _wake_stalled(self) -> None: ...


@dataclass(slots=True)
class Negotiation:
    """The blocks a home MU is asking other MUs for, on behalf of one request."""

    msg: m.Message  # the allocation, write or append that needs them
    buf: int  # the home buffer
    alloc: int  # its allocation id (-1: an allocation being built)
    missing: int  # blocks still to find
    retry: bool  # the request is the first stalled one, being retried
    next: int = 0  # candidate to ask next (index in the nearest-first list)
    asked: int = -1  # MU asked now
    dead: bool = False  # the buffer was freed meanwhile
    refusals: int = 0  # the home MU's refusal count when it began (an allocation's own blocks are lent here)
    guests: dict[int, Ref] = field(default_factory=dict)  # MU -> guest buffer (a build's, or a dead buffer's)


@dataclass(slots=True)
class Gather:
    """A read of a spilled buffer: its parts on other MUs still to come."""

    msg: m.Message  # the reader's request
    parts: int
    ready: int  # cycle the home MU's own part is read
    failed: bool = False


class Spill:
    """One MU's side of spilling: as a home (its buffers' remote blocks) and as a host (guests)."""

    def __init__(self, mu: SpillingMU):
        assert isinstance(mu.storage, VirtualStorage)  # memory.spill needs the virtual policy (config checks)
        self.mu = mu
        self.storage: VirtualStorage = mu.storage
        self.block_bytes = mu.storage.block_bytes
        self.order = nearest_mus(mu.cfg, mu.shard.lay, mu.uid)
        self.guests: dict[int, dict[int, Ref]] = {}  # home allocation -> MU -> its guest buffer there
        self.talks: dict[int, Negotiation] = {}  # request tag -> negotiation waiting for that answer
        self.busy_allocs: dict[int, Negotiation] = {}  # home allocation -> its growth in negotiation
        self.building: dict[int, Negotiation] = {}  # buffer id -> an allocation in negotiation
        self.parked: dict[int, list[m.Message]] = {}  # home allocation -> requests that came meanwhile
        self.gathers: dict[int, Gather] = {}  # read request tag -> the read it is a part of
        self.waiters: dict[int, int] = {}  # MUs refused blocks here since room was last freed -> refusal count
        self.refusals = 0  # requests for blocks this MU could not grant in full
        self.lent: dict[int, tuple[int, int]] = {}  # guest allocation -> (refusals, stalls) when last lent to
        self.quiet: tuple[int, int, int] | None = None  # freeing blocks given back: (refusals, stalls) when
        # lent, and the MU giving them back
        self.missed = False  # a wake came while a negotiation was out
        self.local_only = False  # evicting: make room here, ask no one

    def largest(self) -> int:
        """The largest buffer: what a reference's virtual field addresses, at most every MU's room."""
        room = self.mu.cfg.policy.room(self.mu.cfg.mu)
        return min(room.biggest, largest_buffer(room) * (len(self.order) + 1))

    # ------------------------------------------------------------------ home side: room
    def busy(self, rec) -> bool:
        return rec.alloc in self.busy_allocs

    def spread(self, rec) -> bool:
        """Some of the buffer's blocks are on other MUs."""
        return self.storage.spilled(rec.buf)

    def evictable(self, rec) -> bool:
        """Not a guest (its home maps it, and evicts it with its buffer), not a buffer whose growth
        is in negotiation or whose read is gathering parts from other MUs."""
        return rec.label != SPILLED and not self.busy(rec) and \
            not any(g.msg.buf == rec.buf for g in self.gathers.values())

    def evict(self, rec) -> int:
        """Evict a buffer spread over other MUs: each MU holding blocks of it streams them to this
        MU's DRAM interface and frees its guest buffer (after the block-table lookup, as any request
        for a remote block). Returns the bytes held here, which the home MU writes itself."""
        parts = self.storage.held(rec.buf, 0, rec.size)
        here = parts.pop(LOCAL, (0, 0))
        guests = self.guests.pop(rec.alloc, {})
        at = self._remote_send_at()
        for r, g in sorted(guests.items()):
            a, b = parts.get(r, (0, 0))
            if b > a:
                self.mu.stats.translations += 1
                self.mu.send(m.CONTROL, r, ready=at, arg=m.CTRL_STREAM, nbytes=b - a, buf=self.mu.dram)
            self.free_guest(g, at)
        return here[1] - here[0]

    def park(self, rec, msg: m.Message, retry: bool) -> bool:
        """A request for a buffer whose growth is being negotiated waits for it (in order)."""
        if retry:
            return False
        self.parked.setdefault(rec.alloc, []).append(msg)
        return True

    def build(self, msg: m.Message, buf: int, retry: bool) -> bool:
        """An allocation that does not fit here: map what does, ask other MUs for the rest."""
        if self.local_only:
            return False
        reserved, missing = self.storage.take(buf, msg.nbytes)
        self.mu._delta(0, reserved)
        n = Negotiation(msg, buf, -1, missing, retry, refusals=self.refusals)
        self.building[buf] = n
        return self._ask(n)

    def grow(self, rec, msg: m.Message, nbytes: int, retry: bool) -> bool:
        """A write that does not fit here: map what does, ask other MUs for the rest."""
        if self.local_only:
            return False
        reserved, missing = self.storage.take(rec.buf, nbytes)
        if reserved:
            rec.grows += 1
            self.mu._delta(0, reserved)
        n = Negotiation(msg, rec.buf, rec.alloc, missing, retry)
        self.busy_allocs[rec.alloc] = n
        return self._ask(n)

    def _ask(self, n: Negotiation) -> bool:
        """Ask the next MU for the missing blocks (True: the request is taken care of)."""
        if n.next >= len(self.order):
            return self._fail(n)
        n.asked = r = self.order[n.next]
        n.next += 1
        g = self._guests_of(n).get(r)
        tag = self.mu.request(m.CONTROL, r, arg=m.CTRL_SPILL, nbytes=n.missing, mu=r,
                              buf=g.buf if g else -1, alloc=g.alloc if g else -1)
        self.talks[tag] = n
        return not n.retry

    def _guests_of(self, n: Negotiation) -> dict[int, Ref]:
        return n.guests if n.alloc < 0 or n.dead else self.guests.setdefault(n.alloc, {})

    def granted(self, msg: m.Message, retry: bool) -> bool:
        """An MU answered: ``nbytes`` blocks of guest buffer ``buf`` there are the buffer's next ones."""
        n = self.talks.pop(msg.tag)
        guests = self._guests_of(n)
        if msg.nbytes:
            guests[msg.mu] = Ref(msg.mu, msg.buf, msg.alloc)
        if n.dead:  # freed while asking: what the asked MU holds for it goes too
            g = guests.pop(n.asked, None)
            if g is not None:
                self.free_guest(g)
            self.busy_allocs.pop(n.alloc)
            self._replay(n)
            if n.retry or self.missed:
                self._wake()  # a stalled write of the freed buffer is retried (and finds it gone)
            return True
        if msg.nbytes:
            self.storage.add_remote(n.buf, msg.mu, msg.nbytes)
            self.mu.stats.spilled_blocks += msg.nbytes
            n.missing -= msg.nbytes
        if n.missing > 0:
            self._ask(n)
        else:
            self._done(n)
        return True

    def _done(self, n: Negotiation) -> None:
        """Every block found: the request goes on as if they had been here."""
        mu = self.mu
        if n.alloc < 0:
            del self.building[n.buf]
            rec = mu._open(n.buf, n.msg.src, n.msg.arg, 0)
            self.guests[rec.alloc] = n.guests
            mu.reply(n.msg, buf=n.buf, alloc=rec.alloc, arg=mu.weight_field)
        else:
            del self.busy_allocs[n.alloc]
            mu.handlers[n.msg.kind](n.msg, n.retry)
        if n.retry and mu.stalled and mu.stalled[0][0] is n.msg:
            mu.unstall_first()
        self._replay(n)
        if n.retry or self.missed:
            self._wake()

    def _fail(self, n: Negotiation) -> bool:
        """No MU had the blocks: the request is out of memory (an allocation gives back what it had)."""
        mu = self.mu
        if n.alloc < 0:  # give every block back (waking only whom they kept out)
            del self.building[n.buf]
            mu._let_go(n.buf)
            self._notify(n.refusals, mu.uid)
            for _, g in sorted(n.guests.items()):
                self.mu.shard.oracle(self.mu, oracle.DROP, g.alloc)
                self.mu.send(m.CONTROL, g.mu, arg=m.CTRL_RETURN, mu=g.mu, buf=g.buf, alloc=g.alloc)
        else:
            del self.busy_allocs[n.alloc]
        done = False
        if not n.retry:  # a stalled one stays first in the queue
            self.local_only = True  # evicting makes room here only
            done = mu._out_of_memory(n.msg, False)
            self.local_only = False
        self._replay(n)
        if self.missed:
            self._wake()
        return done

    def _replay(self, n: Negotiation) -> None:
        for msg in self.parked.pop(n.alloc, []) if n.alloc >= 0 else []:
            self.mu.handlers[msg.kind](msg, False)

    def _wake(self) -> None:
        if not self.talks:
            self.missed = False
        self.mu._wake_stalled()

    def holds_wakes(self) -> bool:
        """Stalled requests wait while the first is being negotiated; a wake meanwhile is kept."""
        if self.talks:
            self.missed = True
        return any(n.retry for n in self.talks.values())

    # ------------------------------------------------------------------ home side: data
    def _remote_send_at(self) -> int:
        """When a request for a remote block leaves: after the block-table lookup and decoding."""
        return self.mu.shard.now + self.mu.cfg.spec.translation_latency + REMOTE_LOOKUP

    def write(self, rec, lo: int, hi: int) -> None:
        """Bytes [lo, hi) of a spilled buffer: the port writes those here, the rest go to their MUs."""
        mu = self.mu
        parts = self.storage.held(rec.buf, lo, hi)
        a, b = parts.pop(LOCAL, (0, 0))
        if b > a:
            mu._serve(b - a)
            mu.stats.write_bytes += b - a
        guests = self.guests[rec.alloc]
        for r, (a, b) in sorted(parts.items()):
            g = guests[r]
            mu.stats.translations += 1
            mu.stats.spilled_bytes += b - a
            mu.send(m.WRITE, r, ready=self._remote_send_at(), nbytes=b - a, arg=a, mu=r, buf=g.buf, alloc=g.alloc)

    def read(self, msg: m.Message) -> bool:
        """A read that touches blocks on other MUs (False: all its bytes are here)."""
        mu = self.mu
        rec = mu.table.get(msg.buf)
        if rec is None or not self.spread(rec):
            return False
        parts = self.storage.held(rec.buf, 0, msg.nbytes)
        a, b = parts.pop(LOCAL, (0, 0))
        if not parts:
            return False
        ready = mu.shard.now
        if b > a:
            _, ready = mu._serve(b - a)
            mu.stats.read_bytes += b - a
        gather = Gather(msg, len(parts), ready)
        guests = self.guests[rec.alloc]
        for r, (a, b) in sorted(parts.items()):
            g = guests[r]
            mu.stats.translations += 1
            mu.stats.remote_reads += 1
            tag = mu.request(m.READ_REQ, r, ready=self._remote_send_at(), nbytes=b - a, arg=b, mu=r, buf=g.buf,
                             alloc=g.alloc)
            self.gathers[tag] = gather
        return True

    def gathered(self, msg: m.Message, retry: bool) -> bool:
        """A part of a read came back; the last one completes the reader's answer."""
        g = self.gathers.pop(msg.tag)
        g.failed |= msg.status != m.STATUS_OK
        g.parts -= 1
        if g.parts == 0:
            r = g.msg
            if g.failed:
                self.mu.reply(r, m.READ_RESP, status=m.STATUS_FAILED)
            else:
                self.mu.reply(r, m.READ_RESP, ready=max(g.ready, self.mu.shard.now), nbytes=r.nbytes, buf=r.buf,
                              alloc=r.alloc)
        return True

    def truncate(self, rec, keep: int) -> None:
        """The buffer keeps ``keep`` bytes: its guest buffers keep their share of them."""
        old = self.storage.held(rec.buf, 0, rec.size)
        new = self.storage.held(rec.buf, 0, keep)
        guests = self.guests[rec.alloc]
        for r, g in sorted(guests.items()):
            end = new.get(r, (0, 0))[1]
            if end < old.get(r, (0, 0))[1]:
                self.mu.send(m.TRUNCATE, r, ready=self._remote_send_at(), arg=end, mu=r, buf=g.buf, alloc=g.alloc)

    def release(self, rec) -> None:
        """The buffer is freed: so are its guest buffers (but the one an MU is being asked to
        grow, which goes when its answer comes)."""
        self.lent.pop(rec.alloc, None)
        guests = self.guests.pop(rec.alloc, {})
        n = self.busy_allocs.get(rec.alloc)
        if n is not None:
            n.dead = True
            g = guests.pop(n.asked, None)
            n.guests = {n.asked: g} if g is not None else {}
        for _, g in sorted(guests.items()):
            self.free_guest(g)

    def free_guest(self, g: Ref, ready: int | None = None) -> None:
        self.mu.shard.oracle(self.mu, oracle.DROP, g.alloc)
        self.mu.send(m.FREE, g.mu, ready, mu=g.mu, buf=g.buf, alloc=g.alloc)

    # ------------------------------------------------------------------ host side
    def on_control(self, msg: m.Message) -> bool:
        if msg.arg == m.CTRL_SPILL:
            self._lend(msg)
        elif msg.arg == m.CTRL_RETURN:
            self._returned(msg)
        else:  # CTRL_ROOM: an MU that refused blocks has room again
            self.mu._wake_stalled()
        return True

    def _lend(self, msg: m.Message) -> None:
        """Another MU asks for ``nbytes`` blocks: grant as many as fit here, in its guest buffer."""
        mu, st = self.mu, self.storage
        rec = mu.table.get(msg.buf) if msg.buf >= 0 else None
        if rec is not None and rec.alloc != msg.alloc:
            rec = None
        buf = rec.buf if rec is not None else mu._free_id()
        grant = min(msg.nbytes, st.room_blocks()) if buf >= 0 else 0
        if grant < msg.nbytes:
            self.refusals += 1
            self.waiters[msg.src] = self.refusals
        if grant == 0:
            mu.reply(msg, m.ACK, nbytes=0)
            return
        have = st.blocks(buf) if rec is not None else 0
        reserved, _ = st.take(buf, (have + grant) * self.block_bytes)  # all of it fits: ``grant`` is the room
        if rec is None:
            rec = mu._open(buf, msg.src, SPILLED, reserved)
        else:
            rec.grows += 1
            mu._delta(0, reserved)
        self.lent[rec.alloc] = (self.refusals, mu.stats.stalls)
        mu.reply(msg, m.ACK, buf=rec.buf, alloc=rec.alloc, nbytes=grant)

    def _returned(self, msg: m.Message) -> None:
        """An allocation that did not find all its blocks gives back the ones lent here."""
        rec = self.mu.lookup(msg)
        if rec is None:
            return
        self.quiet = (*self.lent[rec.alloc], msg.src)
        self.mu.release(rec, "returned")
        self.quiet = None

    def room_freed(self) -> bool:
        """Room came free here: the MUs refused blocks since hear of it (of blocks given back:
        those refused while they were lent). True if this MU's stalled requests should retry."""
        if self.quiet is None:
            self._notify(0, None)
            return True
        refusals, stalls, home = self.quiet
        self._notify(refusals, home)
        return self.mu.uid < home and self.mu.stats.stalls > stalls

    def _notify(self, after: int, below: int | None) -> None:
        """CTRL_ROOM to every MU refused blocks here after the ``after``-th refusal (of an id
        below ``below``, if given)."""
        for r, k in sorted(self.waiters.items()):
            if k > after and (below is None or r < below):
                self.mu.send(m.CONTROL, r, arg=m.CTRL_ROOM, mu=r)
                del self.waiters[r]

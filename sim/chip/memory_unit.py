"""The memory unit (MU): buffers under a memory policy, reference counts or weights, and
what happens when memory runs out.

Timing: one SRAM port of ``banks x word`` bytes per cycle serves data in arrival order
(a read or write of ``n`` bytes holds it ``ceil(n / bandwidth)`` cycles, its first word
after ``access_latency`` plus, under the virtual policy, ``translation_latency`` for the
block-table lookup); reference-count and allocation updates take ``control_latency``
and do not use the port. A read names the length it expects and waits at the MU until
the buffer holds that much (data-flow synchronisation, so a read can never overtake the
append it depends on, even on a network that reorders packets).

The MU acts as hardware would on a stale reference: it applies the operation to
whatever buffer now has that id (or to none). The shadow ``alloc`` id every message
carries lets the oracle see what really happened (use after free, double free).

Under ``memory.spill = "nearest"`` a buffer that no longer fits continues on other MUs
(sim/chip/spill.py): the hooks here hand it the growth, the bytes and the reads that
touch remote blocks, and the frees that must reach them.
"""

from __future__ import annotations

from collections import deque

from sim.chip import messages as m
from sim.chip.records import LANDING, BufferRecord, LandingLife, MuStats, Oversize
from sim.chip.spill import Spill, spills
from sim.chip.units import Unit
from sim.memory import oracle
from sim.memory.policies import largest_buffer

CONTROL_LATENCY = 1


class MemoryUnit(Unit):
    def __init__(self, uid: int, tile: int, shard, cfg, dram: int):
        super().__init__(uid, tile, shard)
        self.cfg = cfg
        self.storage = cfg.policy.storage(cfg.mu)
        self.largest = largest_buffer(cfg.policy.room(cfg.mu))  # no buffer may be larger (on any MU)
        self.spill = Spill(self) if spills(cfg) else None
        if self.spill is not None:
            self.largest = self.spill.largest()
        self.table: dict[int, BufferRecord] = {}
        self.buf_space = 1 << cfg.sizing.buffer_id_bits
        self.next_buf = 0
        self.allocs = 0
        self.busy_until = 0
        self.bw = cfg.spec.mu_bytes_per_cycle
        self.latency = cfg.spec.mu_access_latency + (cfg.spec.translation_latency if self.storage.translates else 0)
        self.stalled: deque = deque()  # (message, cycle it first ran out of memory)
        self.dram = dram
        self.total_weight, self.weight_field = cfg.reclaim.first_weight()
        self.stats = MuStats()
        self.first_oom = -1  # cycle of its first out-of-memory event (-1: none)
        # memory requests may find the MU full and be retried (``retry``); the reclamation
        # protocol's messages never allocate
        self.handlers = {
            m.ALLOC: self._allocate, m.APPEND: self._write, m.WRITE: self._write, m.READ_REQ: self._read,
            m.FREE: self._free_msg, m.TRUNCATE: self._truncate, m.CONTROL: self._control,
        }
        self.protocol_handlers = cfg.reclaim.mu_handlers()
        if self.spill is not None:  # other MUs' answers: blocks granted, parts of a read
            self.handlers.update({m.ACK: self.spill.granted, m.READ_RESP: self.spill.gathered})

    # ------------------------------------------------------------------ plumbing
    def on_message(self, msg: m.Message) -> None:
        h = self.handlers.get(msg.kind)
        if h is not None:
            h(msg, False)
        else:
            p = self.protocol_handlers.get(msg.kind)
            if p is None:
                raise RuntimeError(f"MU {self.uid} cannot handle a {m.KINDS[msg.kind]} message "
                                   f"under reclamation protocol {self.cfg.reclaim.name}")
            p(self, msg)
        if self.stalled and self.cfg.on_oom == "evict":  # what it did may have made a buffer evictable
            self._evict_for_stalled()

    def _serve(self, nbytes: int) -> tuple[int, int]:
        """(service start, cycle the last byte is done) on the SRAM port."""
        now = self.shard.now
        start = max(now, self.busy_until)
        dur = -(-nbytes // self.bw)
        self.busy_until = start + dur
        if self.storage.translates:
            self.stats.translations += 1
        return start, start + self.latency + dur

    def lookup(self, msg: m.Message) -> BufferRecord | None:
        """The buffer a message's reference names (the oracle learns of a stale reference)."""
        rec = self.table.get(msg.buf)
        if rec is None or rec.alloc != msg.alloc:
            self.shard.oracle(self, oracle.ACCESS, msg.alloc)
        if rec is not None:
            rec.last_use = self.shard.now
        return rec

    def _delta(self, used: int, reserved: int) -> None:
        if used or reserved:
            self.shard.mem_delta(self.uid, used, reserved)

    def reply(self, msg: m.Message, kind: int = m.ACK, ready: int | list[int] | None = None, **fields) -> None:
        self.send(kind, msg.src, ready if ready is not None else self.shard.now + CONTROL_LATENCY,
                  tag=msg.tag, mu=self.uid, **fields)

    # ------------------------------------------------------------------ allocation
    def _allocate(self, msg: m.Message, retry: bool) -> bool:
        if msg.nbytes > self.largest:
            return self._oversize(msg, msg.arg, msg.nbytes)
        buf = self._free_id()
        g = self.storage.create(buf, msg.nbytes) if buf >= 0 else None
        if g is None:
            if buf >= 0 and self.spill is not None and not msg.flags & m.STREAM:
                return self.spill.build(msg, buf, retry)
            return self._out_of_memory(msg, retry)
        rec = self._open(buf, msg.src, msg.arg, g.reserved)
        if msg.flags & m.STREAM:
            rec.stream, rec.room = True, msg.nbytes
        self.reply(msg, buf=buf, alloc=rec.alloc, arg=self.weight_field)
        return True

    def _open(self, buf: int, owner: int, label: int, reserved: int) -> BufferRecord:
        """Buffer ``buf``, its room reserved (``reserved`` bytes more), is now allocated to ``owner``."""
        self.allocs += 1
        now = self.shard.now
        rec = BufferRecord(buf, (self.uid << 32) | self.allocs, owner, label, now, last_use=now,
                           total=self.total_weight)
        self.table[buf] = rec
        self.next_buf = (buf + 1) % self.buf_space
        self._delta(0, reserved)
        self.shard.oracle(self, oracle.ALLOC, rec.alloc)
        self.shard.trace_instant(self.uid, "allocate", {"buffer": buf, "bytes": reserved})
        return rec

    def _free_id(self) -> int:
        if len(self.table) >= self.buf_space:
            return -1
        b = self.next_buf
        while b in self.table or (self.spill is not None and b in self.spill.building):
            b = (b + 1) % self.buf_space
        return b

    def _write(self, msg: m.Message, retry: bool) -> bool:
        """Append (at the end) or write (at offset ``arg``) ``nbytes`` of data."""
        if msg.buf < 0:  # unmanaged area (background fills): only the port time
            self._serve(msg.nbytes)
            self.stats.write_bytes += msg.nbytes
            return True
        rec = self.lookup(msg)
        if rec is None or rec.failed:
            return True
        if self.spill is not None and self.spill.busy(rec):
            return self.spill.park(rec, msg, retry)
        if rec.stream:
            self._stream_write(rec, msg.nbytes)
            return True
        new = rec.size + msg.nbytes if msg.kind == m.APPEND else max(rec.size, msg.arg + msg.nbytes)
        if rec.evicted:  # it lives in DRAM now: the data goes there
            self.send(m.WRITE, self.dram, nbytes=msg.nbytes, buf=rec.buf, mu=self.uid)  # a tier takes pages for it
            rec.size = new
            rec.peak = max(rec.peak, new)
            if rec.reads:
                self._serve_ready_reads(rec)
            return True
        if new > self.largest:
            return self._oversize(msg, rec.label, new)
        g = self.storage.grow(rec.buf, new)
        if g is None:
            if self.spill is not None:
                return self.spill.grow(rec, msg, new, retry)
            return self._out_of_memory(msg, retry)
        if g.reserved:
            rec.grows += 1
            self._delta(0, g.reserved)
            self.shard.trace_instant(self.uid, "extend", {"buffer": rec.buf, "bytes": g.reserved})
        if g.copy_bytes:
            start, done = self._serve(g.copy_bytes)
            rec.copies += 1
            rec.copied += g.copy_bytes
            self.stats.bytes_copied += g.copy_bytes
            self.stats.copy_cycles += done - start
            self.shard.trace_span(self.uid, "copy", start, done - start, "memory")
            self.shard.at(done, self, self._copy_done, g.old_start)
        elif g.old_start >= 0:
            self._copy_done(g.old_start)
        lo = rec.size if msg.kind == m.APPEND else msg.arg
        if self.spill is not None and self.spill.spread(rec):
            self.spill.write(rec, lo, lo + msg.nbytes)  # some of the bytes land on other MUs
        else:
            self._serve(msg.nbytes)
            self.stats.write_bytes += msg.nbytes
        self._hold(rec, new)
        if rec.reads:
            self._serve_ready_reads(rec)
        return True

    def _stream_write(self, rec: BufferRecord, nbytes: int) -> None:
        """A tile buffer's write: port time, the stream position advances, the room was reserved
        at allocation (the writer's credits keep it from running over unread tiles)."""
        self._serve(nbytes)
        self.stats.write_bytes += nbytes
        rec.written += nbytes
        held = min(rec.written, rec.room)
        if held != rec.size:
            self._hold(rec, held)
        if rec.reads:
            self._serve_ready_reads(rec)

    def _hold(self, rec: BufferRecord, nbytes: int) -> None:
        """The buffer now holds ``nbytes`` of data (its peak and the MU's bytes in use follow;
        the MU's bytes are those in its own blocks)."""
        before = self.storage.used
        self.storage.set_size(rec.buf, nbytes)
        self._delta(self.storage.used - before, 0)
        rec.size = nbytes
        rec.peak = max(rec.peak, nbytes)

    def _copy_done(self, old_start: int) -> None:
        self._delta(0, -self.storage.copy_done(old_start))
        self._room_freed()

    def _truncate(self, msg: m.Message, retry: bool) -> bool:
        rec = self.lookup(msg)
        if rec is None or rec.size <= msg.arg:
            return True
        if self.spill is not None and self.spill.busy(rec):
            return self.spill.park(rec, msg, retry)
        keep = msg.arg
        if rec.evicted:
            rec.size = keep
            return True
        if self.spill is not None and self.spill.spread(rec):
            self.spill.truncate(rec, keep)  # the blocks of other MUs past ``keep`` go first
        self._hold(rec, keep)  # smaller than before: the peak stays
        released = self.storage.shrink(rec.buf, keep)
        if released:
            self._delta(0, -released)
            self.shard.trace_instant(self.uid, "truncate", {"buffer": rec.buf, "bytes": released})
            self._room_freed()
        return True

    # ------------------------------------------------------------------ reads
    def _read(self, msg: m.Message, retry: bool) -> bool:
        rec = self.lookup(msg)
        if rec is not None and not rec.failed and not self._readable(rec, msg):
            rec.reads.append(msg)  # the data it expects has not been written yet (here or, evicted, to DRAM)
            return True
        if rec is not None and rec.evicted:
            self._read_from_dram(msg)
            return True
        self._respond_read(msg, failed=rec is not None and rec.failed)
        return True

    def _read_from_dram(self, msg: m.Message) -> None:
        """An evicted buffer's read: the DRAM interface answers the reader."""
        self.send(m.READ_REQ, self.dram, buf=-1, nbytes=msg.nbytes, arg=msg.src, tag=msg.tag, mu=self.uid)

    def _serve_ready_reads(self, rec: BufferRecord) -> None:
        waiting, rec.reads = rec.reads, []
        for r in waiting:
            if not self._readable(rec, r):
                rec.reads.append(r)
            elif rec.evicted:
                self._read_from_dram(r)
            else:
                self._respond_read(r)

    @staticmethod
    def _readable(rec: BufferRecord, msg: m.Message) -> bool:
        """A read names what it waits for: the buffer's size (``nbytes``, or ``arg`` when a
        reader of a part waits for more), or for a tile buffer the stream position ``arg``
        (the end of the tile it reads)."""
        return rec.written >= msg.arg if rec.stream else rec.size >= max(msg.nbytes, msg.arg)

    def _respond_read(self, msg: m.Message, failed: bool = False) -> None:
        if failed:
            self.reply(msg, m.READ_RESP, status=m.STATUS_FAILED)
            return
        if self.spill is not None and self.spill.read(msg):
            return  # it touches blocks of other MUs: answered once they are in
        start, _ = self._serve(msg.nbytes)
        self.stats.read_bytes += msg.nbytes
        ready = self.cfg.sizing.chunk_ready(start + self.latency, msg.nbytes, self.bw)
        self.reply(msg, m.READ_RESP, ready=ready, nbytes=msg.nbytes, buf=msg.buf, alloc=msg.alloc)

    # ------------------------------------------------------------------ reclamation
    def _free_msg(self, msg: m.Message, retry: bool) -> bool:
        rec = self.lookup(msg)
        if rec is None:
            self.shard.oracle(self, oracle.FREE, msg.alloc)  # nothing there: a double free
        elif self.spill is not None and self.spill.busy(rec):
            return self.spill.park(rec, msg, retry)
        else:
            self.release(rec, "free")
        if msg.tag:  # a free its holder waits for (memory.on_oom = "preempt": the room is back when it hears)
            self.reply(msg, buf=msg.buf, alloc=msg.alloc)
        return True

    def release(self, rec: BufferRecord, how: str) -> None:
        """Free a buffer (its data in DRAM too) and log its life."""
        now = self.shard.now
        room = 0
        if rec.evicted:
            self.send(m.FREE, self.dram, buf=rec.buf, mu=self.uid)  # a tier gives its pages back
        else:
            room = self._let_go(rec.buf)
        if self.spill is not None:
            self.spill.release(rec)  # its blocks on other MUs too
        if rec.label == LANDING:
            self.shard.log(LandingLife(self.uid, rec.alloc, rec.created, now, rec.peak, room))
        del self.table[rec.buf]
        self.shard.oracle(self, oracle.FREE, rec.alloc)
        self.shard.buffer_life(rec.life(self.uid, now, how))
        self.shard.trace_instant(self.uid, "free", {"buffer": rec.buf, "how": how})
        for r in rec.reads:  # a read of a freed buffer gets nothing
            self._respond_read(r, failed=True)
        self._room_freed()

    def _let_go(self, buf: int) -> int:
        """Release a buffer's room here (its data bytes here leave the MU's bytes in use); the room."""
        before = self.storage.used
        room = self.storage.release(buf)
        self._delta(self.storage.used - before, -room)
        return room

    # ------------------------------------------------------------------ out of memory
    def _out_of_memory(self, msg: m.Message, retry: bool) -> bool:
        if retry:
            return False
        self.stats.oom_events += 1
        if self.first_oom < 0:
            self.first_oom = self.shard.now
            self.shard.occupancy.note_oom(self.shard.now)
        mode = self.cfg.on_oom
        if mode == "preempt":  # refused, nothing marked failed: the workload preempts a sequence and asks again
            self.shard.trace_instant(self.uid, "out of memory: refuse", {"kind": m.KINDS[msg.kind]})
            self.reply(msg, buf=msg.buf, alloc=msg.alloc, status=m.STATUS_NO_ROOM)
            return False
        if mode == "evict" and self._evict_until(msg):
            return True
        if mode in ("stall", "evict"):
            self.stats.stalls += 1
            self.stalled.append((msg, self.shard.now))
            self.shard.trace_instant(self.uid, "out of memory: stall", {"kind": m.KINDS[msg.kind]})
            return False
        self.shard.trace_instant(self.uid, "out of memory: fail", {"kind": m.KINDS[msg.kind]})
        self._refuse(msg)
        return False

    def _oversize(self, msg: m.Message, label: int, nbytes: int) -> bool:
        """Refuse a buffer larger than any MU holds, whatever memory.on_oom says: no free
        could ever make room for it, so stalling (or evicting) would wait forever."""
        self.shard.log(Oversize(self.shard.now, self.uid, label, nbytes, self.largest))
        self.shard.trace_instant(self.uid, "larger than an MU: fail", {"kind": m.KINDS[msg.kind], "bytes": nbytes})
        self._refuse(msg)
        return True  # done with (a stalled retry leaves the queue)

    def _refuse(self, msg: m.Message) -> None:
        """Reply that the request failed (a write marks its buffer failed, its reads fail too)."""
        self.stats.failures += 1
        rec = self.table.get(msg.buf) if msg.kind != m.ALLOC else None
        if rec is not None:
            rec.failed = True
            for r in rec.reads:
                self._respond_read(r, failed=True)
            rec.reads = []
        self.reply(msg, buf=msg.buf, alloc=msg.alloc, status=m.STATUS_FAILED)

    def _evict_until(self, msg: m.Message) -> bool:
        """Evict buffers to DRAM, least recently used first, until ``msg`` fits; False if it never
        does. A victim holds room here and is not the request's own buffer, a tile buffer, a guest
        of another MU's buffer or a buffer whose spill is in negotiation; one spread over other MUs
        goes whole (sim/chip/spill.py). With no victim left, a write goes to its own buffer's DRAM
        copy (the buffer is evicted) and a buffer allocation starts in DRAM: evicting never waits
        while memory can be freed. Evicting makes room here only: no other MU is asked meanwhile."""
        if msg.kind == m.ALLOC and self._free_id() < 0:
            return False  # no buffer id is free: evicting frees none
        handler = self.handlers[msg.kind]
        local_only = self.spill is not None and self.spill.local_only
        if self.spill is not None:
            self.spill.local_only = True
        try:
            while True:
                victims = [r for r in self.table.values() if self._evictable(r) and r.buf != msg.buf]
                if not victims:
                    return self._evict_last_resort(msg)
                self._evict(min(victims, key=lambda r: (r.last_use, r.buf)))
                if handler(msg, True):
                    return True
        finally:
            if self.spill is not None:
                self.spill.local_only = local_only

    def _evictable(self, rec: BufferRecord) -> bool:
        return not rec.evicted and not rec.stream and (self.spill is None or self.spill.evictable(rec))

    def _evict_last_resort(self, msg: m.Message) -> bool:
        """No other buffer can go: a write's own buffer goes to DRAM (the data follows it there), a
        (non-tile) allocation is made in DRAM; anything else waits (False)."""
        if msg.kind in (m.APPEND, m.WRITE):
            rec = self.table.get(msg.buf)
            if rec is not None and rec.alloc == msg.alloc and self._evictable(rec):
                self._evict(rec)
                return self.handlers[msg.kind](msg, True)
            return False
        if msg.kind != m.ALLOC or msg.flags & m.STREAM:
            return False
        buf = self._free_id()
        if buf < 0:
            return False
        rec = self._open(buf, msg.src, msg.arg, 0)
        rec.evicted = True
        self.stats.evictions += 1
        self.shard.trace_instant(self.uid, "allocate in DRAM", {"buffer": buf, "bytes": msg.nbytes})
        self.reply(msg, buf=buf, alloc=rec.alloc, arg=self.weight_field)
        return True

    def _evict(self, v: BufferRecord) -> None:
        """Write a buffer's data to DRAM and give its room back: its reads and writes go there from now on."""
        here, others = v.size, 0
        if self.spill is not None and self.spill.spread(v):
            others = len(self.spill.guests.get(v.alloc, {}))
            here = self.spill.evict(v)  # its blocks on other MUs stream to DRAM from there
        self._serve(here)
        self.stats.read_bytes += here
        self.send(m.WRITE, self.dram, nbytes=here, buf=v.buf, mu=self.uid)
        self._let_go(v.buf)
        v.evicted = True
        self.stats.evictions += 1
        self.stats.bytes_evicted += v.size
        self.shard.trace_instant(self.uid, "evict", {"buffer": v.buf, "bytes": v.size, "other_mus": others})

    def _evict_for_stalled(self) -> None:
        """memory.on_oom = "evict": the first stalled request tries eviction again (a buffer may have
        become a victim since it stalled: written, done negotiating, its own buffer writable)."""
        if self.spill is not None and self.spill.holds_wakes():
            return
        msg, _ = self.stalled[0]
        if self._evict_until(msg):
            self.unstall_first()
            self._wake_stalled()

    def _room_freed(self) -> None:
        """Blocks or a region came free here: MUs refused blocks for their buffers learn of it,
        and stalled requests are retried."""
        if self.spill is None or self.spill.room_freed():
            self._wake_stalled()

    def _wake_stalled(self) -> None:
        """Retry stalled requests in arrival order until one still does not fit."""
        if self.spill is not None and self.spill.holds_wakes():
            return  # the first one is asking other MUs for blocks
        while self.stalled:
            msg, _ = self.stalled[0]
            if not self.handlers[msg.kind](msg, True):
                return
            self.unstall_first()

    def unstall_first(self) -> None:
        """The first stalled request has been served: it leaves the queue."""
        _, since = self.stalled.popleft()
        self.stats.stall_cycles += self.shard.now - since
        self.shard.trace_span(self.uid, "stalled", since, self.shard.now - since, "wait")

    # ------------------------------------------------------------------ background traffic
    def _control(self, msg: m.Message, retry: bool) -> bool:
        """CTRL_STREAM: read ``nbytes`` and write them to unit ``buf``'s unmanaged area (a DRAM
        interface acknowledges a tagged one to its sender when the bytes are written)."""
        if self.spill is not None and msg.arg in (m.CTRL_SPILL, m.CTRL_ROOM, m.CTRL_RETURN):
            return self.spill.on_control(msg)
        if msg.arg == m.CTRL_STREAM:
            start, _ = self._serve(msg.nbytes)
            self.stats.read_bytes += msg.nbytes
            ready = self.cfg.sizing.chunk_ready(start + self.latency, msg.nbytes, self.bw)
            # a tagged stream (a swap to DRAM) has its receiver acknowledge the last byte to the sender
            back = dict(tag=msg.tag, arg=msg.src) if msg.tag else {}
            self.send(m.WRITE, msg.buf, ready=ready, nbytes=msg.nbytes, buf=-1, mu=msg.buf, **back)
        return True

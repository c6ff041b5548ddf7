"""A shard's network interfaces: the cycle each packet leaves its tile, and which message each
packet still in the network carries.

A tile's interface offers one packet a cycle: a message's packets take the first free cycles at
or after they are ready. Booked cycles are kept in an open-addressing hash table keyed
``cycle * tiles + tile`` (the packet's id: a packet is named by where and when it entered the
network), each pointing at a later cycle to try, with path compression (a burst finds its free
cycles in near-constant time each, not by scanning every cycle already taken). A second table
maps each packet id to its message's inbox entry until the packet's tail arrives; an entry counts
the packets still to come and the latest arrival, and is delivered when the count reaches zero.

The bookkeeping is per packet and a whole-chip prefill anchor sends about 1 M messages in 20 M
packets: as Python dicts it was half the anchor's run time (booking, inserting and popping the
packet ids), so it runs here in compiled kernels, a call a message and a call a window of
ejections. The tables are linear probing with backward-shift deletion (Knuth, TAOCP 3, 6.4,
Algorithm R), at most half full; the booked cycles before ``now`` are dropped when their table
fills (no send looks before its own ``now``), so it holds about a burst's worth of cycles.
"""

from __future__ import annotations

import numpy as np

from sim.noc.jit import inline, kernel

EMPTY = -1  # a free slot's key (keys are packet ids, never negative)
_MIX = 0x5851F42D4C957F2D  # odd multiplier (Knuth's MMIX LCG): a key's slot is the product's high bits

# counters in ``sc``
BUSY_N, BUSY_SHIFT, WAIT_N, WAIT_SHIFT, OFFER_N = range(5)
MISSING = -1  # arrive: a packet id that no message waits for


@inline
def _find(keys, key, shift):
    """The slot holding ``key``, or ``-1 - s`` for the empty slot ``s`` where it would go."""
    mask = keys.shape[0] - 1
    i = ((key * _MIX) >> shift) & mask
    while True:
        k = keys[i]
        if k == key:
            return i
        if k == EMPTY:
            return -1 - i
        i = (i + 1) & mask


@inline
def _insert(keys, vals, key, val, shift):
    """Put ``key`` (not in the table, which has room) with ``val``."""
    s = -1 - _find(keys, key, shift)
    keys[s] = key
    vals[s] = val


@inline
def _take(keys, vals, key, shift):
    """Remove ``key``; its value, or MISSING. Later keys of its probe run move back into the gap."""
    i = _find(keys, key, shift)
    if i < 0:
        return MISSING
    val = vals[i]
    mask = keys.shape[0] - 1
    j = i
    while True:
        j = (j + 1) & mask
        k = keys[j]
        if k == EMPTY:
            break
        home = ((k * _MIX) >> shift) & mask
        # the key at j stays if its home lies cyclically in (i, j]
        if (i < j and i < home <= j) or (i > j and (home > i or home <= j)):
            continue
        keys[i] = k
        vals[i] = vals[j]
        i = j
    keys[i] = EMPTY
    return val


@inline
def _book(bk, bv, sc, tiles, tile, c):
    """Book the first cycle at or after ``c`` that ``tile``'s interface has free; return it."""
    shift = sc[BUSY_SHIFT]
    s = _find(bk, c * tiles + tile, shift)
    if s >= 0:
        start = c
        while s >= 0:
            c = bv[s]
            s = _find(bk, c * tiles + tile, shift)
        x = start  # path compression: every cycle walked points at the free one
        while x != c:
            t = _find(bk, x * tiles + tile, shift)
            nxt = bv[t]
            bv[t] = c
            x = nxt
    s = -1 - s  # the free cycle's empty slot, where the last probe ended
    bk[s] = c * tiles + tile
    bv[s] = c + 1
    sc[BUSY_N] += 1
    return c


@kernel
def send(bk, bv, wk, wv, sc, offers, tiles, tile, dst, ready, readies, flits, entry, cycles):
    """Book the ``len(flits)`` packets of a message from ``tile`` to ``dst`` (tiles): all ready at
    ``ready``, or (``readies`` not empty) each at its own cycle, at ``ready`` at the earliest
    (the interface's latency). Each takes the first free cycle at or after it is ready and after
    the packet before it (a packet ready no later than the one before: at or after it is ready);
    its cycle goes to ``cycles``, its offer (cycle, tile, dst, flits) to ``offers``, and, if
    ``entry >= 0``, its id to the waiting table for that inbox entry. Returns False, booking
    nothing, if a table or the offers lack room for them."""
    n = flits.shape[0]
    if (2 * (sc[BUSY_N] + n) > bk.shape[0] or 2 * (sc[WAIT_N] + n) > wk.shape[0]
            or sc[OFFER_N] + n > offers.shape[1]):
        return False
    if readies.shape[0] == 0:
        c = ready
        for i in range(n):
            c = _book(bk, bv, sc, tiles, tile, c)
            cycles[i] = c
            c += 1
    else:
        c, last = ready - 1, -1
        for i in range(n):
            r = readies[i]
            want = max(r, ready, c + 1) if r >= last else max(r, ready)
            c = _book(bk, bv, sc, tiles, tile, want)
            last = r
            cycles[i] = c
    o = sc[OFFER_N]
    for i in range(n):
        offers[0, o + i] = cycles[i]
        offers[1, o + i] = tile
        offers[2, o + i] = dst
        offers[3, o + i] = flits[i]
    sc[OFFER_N] = o + n
    if entry >= 0:
        _wait(wk, wv, sc, cycles, n, tiles, tile, entry)
    return True


@inline
def _wait(wk, wv, sc, cycles, n, tiles, tile, entry):
    shift = sc[WAIT_SHIFT]
    for i in range(n):
        _insert(wk, wv, cycles[i] * tiles + tile, entry, shift)
    sc[WAIT_N] += n


@kernel
def expect(wk, wv, sc, packets, entries):
    """Packets from another shard: ``packets[i]`` is of inbox entry ``entries[i]``."""
    shift = sc[WAIT_SHIFT]
    for i in range(packets.shape[0]):
        _insert(wk, wv, packets[i], entries[i], shift)
    sc[WAIT_N] += packets.shape[0]


@kernel
def arrive(wk, wv, sc, left, last, packets, cycles, done):
    """Packets whose tails reached their terminal at ``cycles``: each counted off its entry; the
    entries they complete in ``done``, in order. Returns how many, or ``-1 - i`` if packet ``i``
    belongs to no entry."""
    shift = sc[WAIT_SHIFT]
    nd = 0
    for i in range(packets.shape[0]):
        e = _take(wk, wv, packets[i], shift)
        if e == MISSING:
            return -1 - i
        left[e] -= 1
        if cycles[i] > last[e]:
            last[e] = cycles[i]
        if left[e] == 0:
            done[nd] = e
            nd += 1
    sc[WAIT_N] -= packets.shape[0]
    return nd


@kernel
def rehash(keys, vals, new_keys, new_vals, shift, tiles, since):
    """Every entry of (``keys``, ``vals``) whose cycle (``key // tiles``) is ``since`` or later,
    into the empty table (``new_keys``, ``new_vals``); returns how many."""
    n = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        if k != EMPTY and k // tiles >= since:
            _insert(new_keys, new_vals, k, vals[i], shift)
            n += 1
    return n


def _table(slots: int) -> tuple[np.ndarray, np.ndarray, int]:
    """An empty table of ``slots`` (a power of two) slots, and its shift."""
    return np.full(slots, EMPTY, dtype=np.int64), np.zeros(slots, dtype=np.int64), 64 - (slots.bit_length() - 1)


class Interfaces:
    """The network interfaces of a shard's tiles (module docstring). ``send`` books a message's
    packets, ``arrive`` counts packets off their messages; messages waiting for packets are kept
    by an entry number (``inbox``)."""

    def __init__(self, tiles: int, slots: int = 1 << 12) -> None:
        self.tiles = tiles
        self.sc = np.zeros(5, dtype=np.int64)
        self.bk, self.bv, self.sc[BUSY_SHIFT] = _table(slots)
        self.wk, self.wv, self.sc[WAIT_SHIFT] = _table(slots)
        self.offers = np.zeros((4, slots), dtype=np.int64)
        self._cycles = np.zeros(64, dtype=np.int64)
        self.left = np.zeros(slots, dtype=np.int64)  # per entry: packets still to arrive
        self.last = np.zeros(slots, dtype=np.int64)  # and the latest arrival so far
        self.inbox: list = [None] * slots  # per entry: its message
        self._free = list(range(slots - 1, -1, -1))

    def entry(self, msg, packets: int) -> int:
        """A new inbox entry for ``msg``, waiting for ``packets`` packets."""
        if not self._free:
            n = len(self.inbox)
            self.left = np.concatenate((self.left, np.zeros(n, dtype=np.int64)))
            self.last = np.concatenate((self.last, np.zeros(n, dtype=np.int64)))
            self.inbox.extend([None] * n)
            self._free = list(range(2 * n - 1, n - 1, -1))
        e = self._free.pop()
        self.inbox[e] = msg
        self.left[e] = packets
        self.last[e] = 0
        return e

    def send(self, now: int, tile: int, dst: int, ready: int, readies, flits: np.ndarray, entry: int) -> np.ndarray:
        """Book a message's packets (kernel ``send``; ``now``: the sender's cycle, before which
        no booking is looked at again); their cycles."""
        n = len(flits)
        if n > len(self._cycles):
            self._cycles = np.zeros(2 * n, dtype=np.int64)
        while not send(self.bk, self.bv, self.wk, self.wv, self.sc, self.offers, self.tiles, tile, dst, ready,
                       readies, flits, entry, self._cycles):
            self._room(now, n)
        return self._cycles[:n]

    def expect(self, packets: np.ndarray, entries: np.ndarray) -> None:
        """Packets from another shard, each of an inbox entry."""
        self._room(-1, len(packets))
        expect(self.wk, self.wv, self.sc, packets, entries)

    def arrive(self, packets: np.ndarray, cycles: np.ndarray) -> list[int]:
        """Packets whose tails arrived: the entries they complete (their messages in ``inbox``,
        the last arrival in ``last``), in the packets' order. The caller frees them (``done``)."""
        out = np.empty(len(packets), dtype=np.int64)
        nd = arrive(self.wk, self.wv, self.sc, self.left, self.last, packets, cycles, out)
        if nd < 0:
            raise KeyError(f"packet {int(packets[-1 - nd])} arrived, but no message waits for it")
        return out[:nd].tolist()

    def done(self, entry: int) -> None:
        self.inbox[entry] = None
        self._free.append(entry)

    def take_offers(self) -> tuple[np.ndarray, ...]:
        """The packets booked since the last call: cycles, source and destination tiles, flits
        (views, good until the next ``send``)."""
        n = int(self.sc[OFFER_N])
        self.sc[OFFER_N] = 0
        o = self.offers
        return o[0, :n], o[1, :n], o[2, :n], o[3, :n]

    @property
    def offered(self) -> int:
        return int(self.sc[OFFER_N])

    @property
    def waiting(self) -> int:
        """Packets in the network that a message here waits for."""
        return int(self.sc[WAIT_N])

    def _room(self, now: int, n: int) -> None:
        """Room for ``n`` more packets in every table and in the offers (``now < 0``: the
        waiting table only): a table over half full is rebuilt, its booked cycles before ``now``
        dropped, at twice its size if what it keeps is over a quarter of it."""
        if now >= 0 and 2 * (self.sc[BUSY_N] + n) > len(self.bk):
            self.bk, self.bv = self._rebuilt(self.bk, self.bv, BUSY_N, BUSY_SHIFT, now, n)
        if 2 * (self.sc[WAIT_N] + n) > len(self.wk):
            self.wk, self.wv = self._rebuilt(self.wk, self.wv, WAIT_N, WAIT_SHIFT, 0, n)
        if now >= 0 and self.sc[OFFER_N] + n > self.offers.shape[1]:
            grown = np.zeros((4, 2 * (self.offers.shape[1] + n)), dtype=np.int64)
            grown[:, :self.offers.shape[1]] = self.offers
            self.offers = grown

    def _rebuilt(self, keys, vals, count: int, which: int, since: int, n: int):
        kept = int(np.count_nonzero((keys != EMPTY) & (keys // self.tiles >= since)))
        slots = len(keys)
        while 4 * (kept + n) > slots:
            slots *= 2
        new_keys, new_vals, shift = _table(slots)
        self.sc[count] = rehash(keys, vals, new_keys, new_vals, shift, self.tiles, since)
        self.sc[which] = shift
        return new_keys, new_vals

"""The network interfaces' compiled bookkeeping against brute force: each packet in the first free
cycle of its tile at or after it is ready (and after the packet before it), and a message
delivered when its last packet arrives, at that packet's cycle; with tables small enough that
they are rebuilt, pruned and grown many times over."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.chip.interface import Interfaces

TILES = 7


def _first_free(taken: set, c: int) -> int:
    while c in taken:
        c += 1
    return c


def _brute_book(taken: set, ready: int, readies: list[int] | None, n: int) -> list[int]:
    """The rule written out: ``ready`` is the earliest cycle (the interface's latency); with
    ``readies``, a packet ready no later than the one before looks from its own ready cycle."""
    out = []
    if readies is None:
        c = ready
        for _ in range(n):
            c = _first_free(taken, c)
            taken.add(c)
            out.append(c)
            c += 1
        return out
    c, last = ready - 1, -1
    for r in readies:
        want = max(r, ready, c + 1) if r >= last else max(r, ready)
        c = _first_free(taken, want)
        taken.add(c)
        out.append(c)
        last = r
    return out


sends = st.lists(st.tuples(st.integers(0, 6),  # cycles since the send before
                           st.integers(0, TILES - 1),  # tile
                           st.integers(0, 12),  # ready, cycles after now
                           st.integers(1, 9),  # packets
                           st.booleans(),  # each packet its own ready cycle
                           st.lists(st.integers(0, 15), min_size=9, max_size=9)),
                 min_size=1, max_size=120)


@settings(max_examples=150, deadline=None)
@given(sends)
def test_every_packet_takes_the_first_free_cycle_of_its_tile(script):
    ni = Interfaces(TILES, slots=8)
    taken = {t: set() for t in range(TILES)}
    now = 0
    offered = []
    for gap, tile, ahead, n, own, rs in script:
        now += gap
        flits = np.full(n, 2, dtype=np.int64)
        first = now + 1
        if own:
            readies = [now + r for r in rs[:n]]
            got = ni.send(now, tile, 0, first, np.array(readies, dtype=np.int64), flits, -1).tolist()
            want = _brute_book(taken[tile], first, readies, n)
        else:
            got = ni.send(now, tile, 0, first + ahead, np.zeros(0, dtype=np.int64), flits, -1).tolist()
            want = _brute_book(taken[tile], first + ahead, None, n)
        assert got == want
        offered += [(c, tile) for c in got]
        taken[tile] = {c for c in taken[tile] if c >= now}  # what a later send can still see
    cycles, src, dst, fl = ni.take_offers()
    assert list(zip(cycles.tolist(), src.tolist())) == offered
    assert (fl == 2).all() and (dst == 0).all()
    assert ni.offered == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=60), st.randoms(use_true_random=False))
def test_a_message_is_delivered_when_its_last_packet_arrives(sizes, rnd):
    ni = Interfaces(TILES, slots=8)
    packets, owner, entries = [], {}, []
    for i, n in enumerate(sizes):
        e = ni.entry(f"m{i}", n)
        entries.append(e)
        cycles = ni.send(i, i % TILES, 1, i + 1, np.zeros(0, dtype=np.int64), np.ones(n, dtype=np.int64), e)
        for c in cycles.tolist():
            pid = c * TILES + i % TILES
            packets.append(pid)
            owner[pid] = i
    assert ni.waiting == len(packets)
    rnd.shuffle(packets)
    arrival = {p: 1000 + rnd.randrange(50) for p in packets}
    done = []
    for lo in range(0, len(packets), 5):  # a window of ejections at a time
        batch = packets[lo:lo + 5]
        for e in ni.arrive(np.array(batch, dtype=np.int64), np.array([arrival[p] for p in batch], dtype=np.int64)):
            done.append((ni.inbox[e], int(ni.last[e])))
            ni.done(e)
    last_packet = {}
    for k, p in enumerate(packets):
        last_packet[owner[p]] = k
    order = sorted(last_packet, key=last_packet.get)
    want = [(f"m{i}", max(arrival[p] for p in packets if owner[p] == i)) for i in order]
    assert done == want
    assert ni.waiting == 0


def test_packets_from_another_shard_and_a_packet_nobody_waits_for():
    ni = Interfaces(TILES, slots=8)
    e = ni.entry("remote", 3)
    ids = np.array([5 * TILES + 2, 6 * TILES + 2, 7 * TILES + 2], dtype=np.int64)
    ni.expect(ids, np.full(3, e, dtype=np.int64))
    assert ni.arrive(ids[:2], np.array([40, 41], dtype=np.int64)) == []
    assert ni.arrive(ids[2:], np.array([39], dtype=np.int64)) == [e]
    assert ni.last[e] == 41
    with pytest.raises(KeyError, match=f"packet {5 * TILES + 2} arrived, but no message waits for it"):
        ni.arrive(ids[:1], np.array([50], dtype=np.int64))

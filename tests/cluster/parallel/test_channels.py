"""Point-to-point channels between shard actors (cluster/parallel/channels.py), here between
threads of one process: every message arrives whole and in order, whatever its size, and a
peer that goes away is reported, not waited for."""

import threading

import numpy as np
import pytest

from cluster.parallel.channels import ChannelClosed, Channels, cores_here, new_secret, polls


def _mesh(n: int, node=lambda i: "node"):
    chans = [Channels(i, n, node(i), "127.0.0.1") for i in range(n)]
    addresses = [c.address for c in chans]
    secret = new_secret()
    threads = [threading.Thread(target=c.connect, args=(addresses, secret)) for c in chans]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(len(c.peers) == n - 1 for c in chans)
    return chans


def _exchange_all(chans, outgoing):
    got = [None] * len(chans)

    def run(i):
        got[i] = chans[i].exchange(outgoing[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(chans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return got


@pytest.mark.parametrize("n,local", [(2, True), (3, True), (4, False)], ids=["unix-2", "unix-3", "tcp-4"])
def test_every_message_arrives_whole_from_every_peer(n, local):
    chans = _mesh(n, (lambda i: "node") if local else (lambda i: f"node{i}"))
    # each knows how many actors share its node: on 2 cores, 3 of them sleep instead of polling
    assert [c.actors_here for c in chans] == [n if local else 1] * n
    assert not polls(3, 2) and polls(2, 2) and polls(1, cores_here())
    try:
        rng = np.random.default_rng(7)
        # sizes from empty to 8 MB: far beyond a socket buffer, sent both ways at once
        for size in (0, 1, 1000, 1 << 20):
            outgoing = [{j: rng.integers(-2**62, 2**62, size) for j in range(n) if j != i} for i in range(n)]
            got = _exchange_all(chans, outgoing)
            for i in range(n):
                for j in range(n):
                    if i != j:
                        assert np.array_equal(got[i][j], outgoing[j][i])
    finally:
        for c in chans:
            c.close()


def test_a_peer_that_goes_away_is_reported():
    a, b = _mesh(2)
    b.close()
    with pytest.raises(ChannelClosed, match="shard 1 closed its channel"):
        a.exchange({1: np.arange(4)})
    a.close()

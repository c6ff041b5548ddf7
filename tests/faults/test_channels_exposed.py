"""The shard-to-shard channels listen on the node's IP: a stranger who reaches a listener must
not join a run nor make an actor allocate. Here the actors are threads of this process (the
channels are the ones a Ray run uses, cluster/parallel/channels.py); the handshake a peer
follows is written out from its documented protocol, not borrowed from the module."""

from __future__ import annotations

import hashlib
import hmac
import logging
import multiprocessing
import socket
import struct
import threading
import tracemalloc

import numpy as np
import pytest

from cluster.jobs.noc import NocGrid
from cluster.parallel import channels as ch
from cluster.parallel.channels import ChannelClosed, Channels, FrameTooLarge, new_secret
from cluster.parallel.local import run_local
from cluster.parallel.ray_actors import ShardActor
from sim.noc.params import NocParams
from sim.noc.summary import summarize_noc

NOC = NocParams(rows=4, cols=4, rate=0.2, warmup_cycles=50, measure_cycles=100, drain_cycles=500)
LEN = struct.Struct("<q")


def _dial_as_peer(address, index: int, secret: bytes) -> socket.socket:
    """A peer's side of the handshake: answer the listener's nonce with HMAC-SHA256(secret,
    b"dial" + nonce + index) and check its answer to ours."""
    s = socket.create_connection((address.host, address.port), timeout=10)
    theirs = _recv(s, 16)
    mine = b"m" * 16
    s.sendall(LEN.pack(index) + mine + hmac.new(secret, b"dial" + theirs + LEN.pack(index), hashlib.sha256).digest())
    answer = _recv(s, 32)
    assert hmac.compare_digest(answer, hmac.new(secret, b"listen" + mine + LEN.pack(0), hashlib.sha256).digest())
    return s


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return buf
        buf += chunk
    return buf


def _strangers(address, secret_of_another_run: bytes) -> list[socket.socket]:
    """Three strangers at a listener before its peers dial: one proving another run's secret
    (from a thread: it waits for the listener's nonce), one sending an old-style frame (its
    index, then a huge length), one saying nothing."""
    wrong = socket.create_connection((address.host, address.port), timeout=10)
    garbage = socket.create_connection((address.host, address.port), timeout=10)
    garbage.sendall(LEN.pack(1) + LEN.pack(1 << 60) + b"\0" * 40)
    silent = socket.create_connection((address.host, address.port), timeout=10)

    def prove_another_secret():
        nonce = _recv(wrong, 16)
        wrong.sendall(LEN.pack(1) + b"x" * 16
                      + hmac.new(secret_of_another_run, b"dial" + nonce + LEN.pack(1), hashlib.sha256).digest())

    threading.Thread(target=prove_another_secret, daemon=True).start()
    return [wrong, garbage, silent]


def _closed_on_us(s: socket.socket) -> bool:
    """Whether the other end closed ``s`` (what it sent first, such as a nonce, is skipped)."""
    s.settimeout(10)
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return True


def _actor(model, regions, index: int, epoch: int, pipe) -> None:
    """One shard actor, as a Ray run's directly chained actors are: its own process, listening
    on TCP (a node of its own), told the run's addresses and secret once every actor listens."""
    n = len(regions)
    actor = ShardActor(model, [regions[index]], index, n, epoch)  # its own region, as run_ray loads it
    actor.channels = Channels(index, n, f"node{index}", "127.0.0.1")
    pipe.send(actor.channels.address)
    addresses, secret = pipe.recv()
    try:
        actor.connect(addresses, secret)
        while not actor.run_segment(60.0).done:
            pass
        pipe.send(actor.report().reports)
    except Exception as exc:  # noqa: BLE001 - handed to the test
        pipe.send(exc)


def _run_actors(job, regions, epoch, secret, before_connect):
    """The run's reports, its actors in processes; ``before_connect(addresses)`` runs once
    every actor listens and before any has joined its peers (its return value is passed on)."""
    ctx = multiprocessing.get_context("fork")  # the platform default: no interpreter start-up per actor
    model = job.model(regions)
    pipes, procs = [], []
    for i in range(len(regions)):
        here, there = ctx.Pipe()
        procs.append(ctx.Process(target=_actor, args=(model, regions, i, epoch, there), daemon=True))
        procs[-1].start()
        pipes.append(here)
    try:
        addresses = [p.recv() for p in pipes]
        extra = before_connect(addresses)
        for p in pipes:
            p.send((addresses, secret))
        got = [p.recv() if p.poll(120) else TimeoutError("no report") for p in pipes]
    finally:
        for proc in procs:
            proc.join(10)
            proc.kill()
    errors = [g for g in got if isinstance(g, BaseException)]
    assert not errors, errors
    return [r for g in got for r in g], extra


def _summary(job, reports) -> dict:
    """The noc_summary row the reports make (what a run stores)."""
    return summarize_noc(job.p, reports, False)


def test_a_stranger_without_the_secret_is_refused_and_the_run_is_unchanged(monkeypatch):
    monkeypatch.setattr(ch, "HANDSHAKE_SECONDS", 1.0)
    job = NocGrid(NOC)
    regions = job.regions(2, "cols")
    epoch = job.epoch(regions, None)[0]
    alone = run_local(job.model(regions), regions, epoch)
    reports, strangers = _run_actors(job, regions, epoch, new_secret(),
                                     lambda addresses: _strangers(addresses[0], new_secret()))
    # every stranger was closed on, and the run's summary is the one without strangers
    assert all(_closed_on_us(s) for s in strangers)
    assert _summary(job, reports) == summarize_noc(job.p, alone.reports, False, alone.in_transit_flits)


def test_a_refusal_is_logged_and_once_joined_the_listeners_are_gone(caplog):
    secret = new_secret()
    a, b = Channels(0, 2, "n0", "127.0.0.1"), Channels(1, 2, "n1", "127.0.0.1")
    addresses = [a.address, b.address]
    stranger = socket.create_connection(("127.0.0.1", a.address.port), timeout=10)
    stranger.sendall(LEN.pack(1) + b"\0" * 48)
    with caplog.at_level(logging.WARNING, logger="cluster.parallel.channels"):
        t = threading.Thread(target=a.connect, args=(addresses, secret))
        t.start()
        b.connect(addresses, secret)
        t.join(30)
    assert [r.getMessage() for r in caplog.records] == [
        f"rdasim channels: shard 0 refused a connection from {stranger.getsockname()}: "
        "it did not prove the run's secret"]
    assert _closed_on_us(stranger) and sorted(a.peers) == [1]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", a.address.port), timeout=5)
    a.close()
    b.close()


def test_a_listener_that_cannot_prove_the_secret_is_not_joined():
    fake = socket.create_server(("127.0.0.1", 0))
    port = fake.getsockname()[1]

    def answer_wrongly():
        s, _ = fake.accept()
        s.sendall(b"n" * 16)
        _recv(s, 8 + 16 + 32)
        s.sendall(b"\0" * 32)
        s.close()

    t = threading.Thread(target=answer_wrongly)
    t.start()
    c = Channels(1, 2, "n1", "127.0.0.1")
    with pytest.raises(ChannelClosed, match="is not shard 0 of this run"):
        c.connect([ch.ChannelAddress(0, "n0", "/nonexistent", "127.0.0.1", port), c.address], new_secret())
    t.join(10)
    c.close()
    fake.close()


def _joined_by_raw_peer(secret: bytes, **kw) -> tuple[Channels, socket.socket]:
    """Shard 0's channels, joined by a raw socket as shard 1 (it holds the secret)."""
    c = Channels(0, 2, "n0", "127.0.0.1", **kw)
    peer: list[socket.socket] = []
    t = threading.Thread(target=lambda: peer.append(_dial_as_peer(c.address, 1, secret)))
    t.start()
    c.connect([c.address, ch.ChannelAddress(1, "n1", "/nonexistent", "127.0.0.1", 1)], secret)
    t.join(30)
    return c, peer[0]


def test_an_oversized_length_prefix_closes_the_channel_without_allocating():
    cap = 1 << 20
    c, s = _joined_by_raw_peer(new_secret(), max_frame_bytes=cap)
    s.sendall(LEN.pack(cap // 8 + 1))  # one word over the cap; a peer holding the secret is bounded too
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLarge, match=r"frame of 131073 int64 words, outside 0..131072 \(MAX_FRAME_BYTES"):
            c.exchange({1: np.arange(4)})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < cap // 4, peak
    assert 1 not in c.peers and _closed_on_us(s)
    s.close()
    c.close()


@pytest.mark.parametrize("words", [-1, 1 << 62])
def test_a_negative_or_astronomical_length_is_refused_too(words):
    c, s = _joined_by_raw_peer(new_secret())
    s.sendall(LEN.pack(words))
    with pytest.raises(FrameTooLarge, match=f"frame of {words} int64 words"):
        c.exchange({1: np.arange(4)})
    s.close()
    c.close()


def test_a_sender_over_the_cap_fails_before_sending():
    c, s = _joined_by_raw_peer(new_secret(), max_frame_bytes=64)
    with pytest.raises(FrameTooLarge, match="shard 0's epoch for shard 1 is 72 bytes, over the channels' cap of 64"):
        c.exchange({1: np.arange(9)})
    s.close()
    c.close()

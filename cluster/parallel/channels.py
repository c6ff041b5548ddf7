"""Point-to-point channels between shard actors: epochs exchanged without the driver.

Every pair of shard actors shares one stream socket: a Unix-domain socket when both
live on the same node (no TCP stack; the kernel copies from one process to the other),
TCP otherwise (SST's links and DAM's channels likewise never go through a coordinator).
An epoch's exchange sends each peer one message (an int64 array, cluster/parallel/wire.py) and
receives one from each; a shard never needs to know where its peers run.

Messages are framed by their length (8 bytes, little endian) and moved with
non-blocking sockets, waiting on a selector when none can move, so that two actors sending
each other more than a socket buffer holds cannot deadlock. A peer that dies closes its sockets (the kernel
does it for a killed process), which the survivors see as end of stream and report.

The listeners are on the node's IP, so a channel is authenticated before it joins a run: the
driver draws a secret per run (``new_secret``) and hands it to every actor with the addresses;
on each connection both ends prove they hold it by an HMAC-SHA256 of a fresh nonce the other
end chose (challenge-response, RFC 2104; the secret itself never crosses the socket). A
connection that cannot prove it is logged and closed, and the listener waits on for its
peer. A frame longer than MAX_FRAME_BYTES closes its channel with an error before anything
is allocated for it.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import selectors
import shutil
import socket
import struct
import tempfile
import time
from dataclasses import dataclass

import numpy as np

_LEN = struct.Struct("<q")
CONNECT_SECONDS = 30.0  # to reach a peer's listener at set-up: a firewall shows here, not as a hang
HANDSHAKE_SECONDS = 5.0  # for a connection to prove the run's secret: a silent stranger waits no longer
# The largest epoch one actor may send another: a documented cap rather than a per-model bound
# (what crosses a cut in an epoch depends on the model and its windows). Real frames are far
# below it: a NoC cut carries at most one flit per link and cycle of a window; the largest
# measured, 2 column shards of a 16x16 / 32x32 mesh at rate 0.3 / 0.5 (saturated), 342 / 646
# words (2.7 / 5.2 KB). A frame over it fails the run with this name in the message.
MAX_FRAME_BYTES = 1 << 30
_NONCE = 16
_SECRET = 32
_log = logging.getLogger(__name__)


def polls(actors_here: int, cores_here: int) -> bool:
    """Whether an actor should poll for its peers' epochs rather than sleep on its sockets:
    only while every actor on its node has a core of its own. Polling (yielding the core
    between polls) answers in ~3 us against ~70 us to wake a sleeping process, but an actor
    that polls stays runnable: with more actors than cores it takes the core from the peer
    whose epoch it waits for (3 column shards of examples/moe_switch.toml on 2 cores, load
    13-16: 39.6 s polling, 23.4 s sleeping; examples/race.toml: 21.6 s against 12.7 s)."""
    return actors_here <= cores_here


def cores_here() -> int:
    """The cores this process may run on (its affinity: a container's or a job's share)."""
    return len(os.sched_getaffinity(0))


def new_secret() -> bytes:
    """A run's channel secret: every actor of the run gets it from the driver, nobody else."""
    return secrets.token_bytes(_SECRET)


def _proof(secret: bytes, role: bytes, nonce: bytes, index: int) -> bytes:
    """Shard ``index``'s proof, in ``role``, that it holds ``secret``: an HMAC of the other end's nonce."""
    return hmac.new(secret, role + nonce + _LEN.pack(index), hashlib.sha256).digest()


class ChannelClosed(RuntimeError):
    """A peer's end of a channel closed before its message arrived (the peer failed)."""


class FrameTooLarge(ChannelClosed):
    """A peer announced a frame longer than the protocol allows; its channel is closed."""


@dataclass(frozen=True)
class ChannelAddress:
    """Where one actor listens: its node, a Unix socket path on that node, and a TCP endpoint."""

    index: int
    node: str
    path: str
    host: str
    port: int


class Channels:
    """One actor's end of the channels to every other shard actor of a run."""

    def __init__(self, index: int, shards: int, node: str, host: str, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.index, self.shards, self.node = index, shards, node
        self.max_frame_bytes = max_frame_bytes
        self._dir = tempfile.mkdtemp(prefix="rdasim-ch-")
        path = os.path.join(self._dir, f"{index}.sock")
        self._unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._unix.bind(path)
        self._unix.listen(shards)
        self._tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._tcp.bind((host, 0))
        self._tcp.listen(shards)
        self.address = ChannelAddress(index, node, path, host, self._tcp.getsockname()[1])
        self.peers: dict[int, socket.socket] = {}
        self.actors_here = 1  # shard actors on this node, this one included (known once connected)
        self._selector = selectors.DefaultSelector()

    def connect(self, addresses: list[ChannelAddress], secret: bytes) -> None:
        """Join every peer, each proving it holds the run's ``secret``: dial those of lower
        index, accept those of higher (the listeners' backlogs hold the dials until each side
        gets here, and a dial waits only on a lower index, so the order cannot deadlock).
        The listeners close once every peer has joined: nobody else can connect during the run."""
        for a in addresses:
            if a.index < self.index:
                self._add(a.index, self._dial(a, secret))
        while len(self.peers) < self.shards - 1:
            self._accept(secret)
        self.actors_here = sum(a.node == self.node for a in addresses)
        self._unix.close()
        self._tcp.close()

    def _dial(self, a: ChannelAddress, secret: bytes) -> socket.socket:
        """A channel to shard ``a``'s listener, both ends having proved the secret."""
        if a.node == self.node:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: str | tuple[str, int] = a.path
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = (a.host, a.port)
        s.settimeout(CONNECT_SECONDS)
        try:
            s.connect(target)
            theirs = _recv_exactly(s, _NONCE)
            mine = secrets.token_bytes(_NONCE)
            s.sendall(_LEN.pack(self.index) + mine + _proof(secret, b"dial", theirs, self.index))
            answer = _recv_exactly(s, hashlib.sha256().digest_size)
        except (OSError, ChannelClosed) as exc:
            s.close()
            raise ChannelClosed(f"shard {self.index} cannot reach shard {a.index} at {target}: {exc}") from None
        if not hmac.compare_digest(answer, _proof(secret, b"listen", mine, a.index)):
            s.close()
            raise ChannelClosed(f"shard {self.index}: the listener at {target} is not shard {a.index} "
                                "of this run (it could not prove the run's secret)")
        return s

    def _accept(self, secret: bytes) -> None:
        """Take one connection; it joins as a peer only if it proves the secret and names a
        peer still awaited, else it is logged and closed."""
        sel = selectors.DefaultSelector()
        for lst in (self._unix, self._tcp):
            sel.register(lst, selectors.EVENT_READ)
        try:
            ready = sel.select(CONNECT_SECONDS)
        finally:
            sel.close()
        if not ready:
            raise ChannelClosed(f"shard {self.index}: no peer connected within {CONNECT_SECONDS:.0f} s")
        s, where = ready[0][0].fileobj.accept()  # type: ignore[union-attr]
        s.settimeout(HANDSHAKE_SECONDS)
        try:
            peer = self._challenge(s, secret)
        except (OSError, ChannelClosed, ValueError) as exc:
            _log.warning("rdasim channels: shard %d refused a connection from %s: %s", self.index,
                         where or "a local socket", exc)
            s.close()
            return
        s.settimeout(CONNECT_SECONDS)
        self._add(peer, s)

    def _challenge(self, s: socket.socket, secret: bytes) -> int:
        """The index of the peer at ``s`` once it has proved the secret (and been answered)."""
        mine = secrets.token_bytes(_NONCE)
        s.sendall(mine)
        digest = hashlib.sha256().digest_size
        got = _recv_exactly(s, _LEN.size + _NONCE + digest)
        peer = _LEN.unpack(got[:_LEN.size])[0]
        theirs, proof = got[_LEN.size:_LEN.size + _NONCE], got[_LEN.size + _NONCE:]
        if not hmac.compare_digest(proof, _proof(secret, b"dial", mine, peer)):
            raise ValueError("it did not prove the run's secret")
        if not self.index < peer < self.shards or peer in self.peers:
            raise ValueError(f"it named shard {peer}, which this shard does not await")
        s.sendall(_proof(secret, b"listen", theirs, self.index))
        return peer

    def _add(self, peer: int, s: socket.socket) -> None:
        if s.family == socket.AF_INET:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # epochs are latency-bound
        s.setblocking(False)
        self.peers[peer] = s

    def exchange(self, outgoing: dict[int, np.ndarray], spin: float = 0.0) -> dict[int, np.ndarray]:
        """Send ``outgoing[j]`` to each peer j and return what each peer sent this actor,
        polling for up to ``spin`` seconds before sleeping until the sockets are ready (a
        sleeping process takes ~70 us to wake in a VM, a poll ~3 us; between polls the core
        goes to whoever else needs it, a peer on an oversubscribed machine among them)."""
        sending: dict[socket.socket, list[memoryview]] = {}
        inboxes = {j: _Inbox(j, self.max_frame_bytes) for j in self.peers}
        index = {s: j for j, s in self.peers.items()}
        receiving = {s: inboxes[j] for j, s in self.peers.items()}
        for j, s in self.peers.items():
            arr = np.ascontiguousarray(outgoing[j], dtype=np.int64)
            if arr.nbytes > self.max_frame_bytes:
                raise FrameTooLarge(f"shard {self.index}'s epoch for shard {j} is {arr.nbytes} bytes, over the "
                                    f"channels' cap of {self.max_frame_bytes} (MAX_FRAME_BYTES)")
            sending[s] = [memoryview(_LEN.pack(arr.size)), arr.view(np.uint8).data]
        deadline = time.perf_counter() + spin
        while True:  # every attempt is non-blocking: try each socket, then poll again or wait
            for s in list(sending):
                if _send_some(s, sending[s], index[s]):
                    del sending[s]
            for s in list(receiving):
                try:
                    if receiving[s].read(s):
                        del receiving[s]
                except FrameTooLarge:
                    s.close()  # its length is all that was read: nothing was allocated for it
                    del self.peers[index[s]]
                    raise
            if not (sending or receiving):
                return {j: box.array() for j, box in inboxes.items()}
            if time.perf_counter() < deadline:
                os.sched_yield()  # a process that needs the core more (a peer, on a shared machine) gets it
            else:
                self._wait(sending, receiving)

    def _wait(self, sending, receiving) -> None:
        """Sleep until a socket we still send to can take bytes or one we read from has some."""
        for s in set(sending) | set(receiving):
            self._selector.register(s, (selectors.EVENT_READ if s in receiving else 0) | (
                selectors.EVENT_WRITE if s in sending else 0))
        try:
            self._selector.select()
        finally:
            for key in list(self._selector.get_map().values()):
                self._selector.unregister(key.fileobj)

    def close(self) -> None:
        for s in [*self.peers.values(), self._unix, self._tcp]:
            s.close()
        self.peers = {}
        self._selector.close()
        shutil.rmtree(self._dir, ignore_errors=True)


class _Inbox:
    """One message arriving from one peer: its length, then its int64 words."""

    def __init__(self, peer: int, max_bytes: int) -> None:
        self.peer, self.max_bytes = peer, max_bytes
        self._head = bytearray(_LEN.size)
        self._got = 0
        self._body: np.ndarray | None = None

    def read(self, s: socket.socket) -> bool:
        """Read what the socket has; True once the whole message is in."""
        while True:
            if self._body is None:
                view = memoryview(self._head)[self._got:]
            else:
                view = self._body.view(np.uint8).data[self._got - _LEN.size:]
            if not len(view):
                if self._body is None:
                    self._body = np.empty(self._length(), dtype=np.int64)
                    if self._body.size:
                        continue
                return True
            try:
                got = s.recv_into(view)
            except BlockingIOError:
                return False
            except ConnectionResetError:  # it closed with our last message unread
                got = 0
            if got == 0:
                raise ChannelClosed(f"shard {self.peer} closed its channel (it failed or was stopped)")
            self._got += got

    def _length(self) -> int:
        """The announced message's words, checked before anything is allocated for them."""
        words = _LEN.unpack(self._head)[0]
        if not 0 <= words <= self.max_bytes // 8:
            raise FrameTooLarge(f"shard {self.peer} announced a frame of {words} int64 words, outside 0.."
                                f"{self.max_bytes // 8} (MAX_FRAME_BYTES = {self.max_bytes}); its channel is closed")
        return words

    def array(self) -> np.ndarray:
        assert self._body is not None
        return self._body


def _send_some(s: socket.socket, parts: list[memoryview], peer: int) -> bool:
    """Send what the socket takes now; True once every part has gone."""
    while parts:
        try:
            sent = s.send(parts[0])
        except BlockingIOError:
            return False
        except (BrokenPipeError, ConnectionResetError):
            raise ChannelClosed(f"shard {peer} closed its channel (it failed or was stopped)") from None
        parts[0] = parts[0][sent:]
        if not len(parts[0]):
            parts.pop(0)
    return True


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ChannelClosed("a peer closed its channel while connecting")
        buf += chunk
    return bytes(buf)

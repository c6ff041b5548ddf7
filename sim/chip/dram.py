"""DRAM interface unit on the chip's edge: holds evicted buffers' and spilled tensors' data.

One port of ``dram_bytes_per_cycle`` serves requests in arrival order after
``dram_latency`` cycles. A read (forwarded by an MU for a buffer it evicted, or sent by a
CU) is answered straight to the unit named in ``arg``, with the tag it asked with. A
CTRL_LOAD control message streams ``nbytes`` into an MU's buffer (weights entering a
partition, a cache's first contents, a swapped-out KV cache coming back): ``mu``, ``buf``
and ``alloc`` name it, ``flags`` says whether it is a tile buffer (STREAM) or one that
grows. A tagged write (an MU streaming a swapped-out buffer here) is acknowledged to the
unit in ``arg`` once its last byte is written.
"""

from __future__ import annotations

from sim.chip import messages as m
from sim.chip.units import Unit


class DramUnit(Unit):
    def __init__(self, uid: int, tile: int, shard, cfg):
        super().__init__(uid, tile, shard)
        self.cfg = cfg
        self.bw = cfg.spec.dram_bytes_per_cycle
        self.latency = cfg.spec.dram_latency
        self.busy_until = 0
        self.bytes_written = 0
        self.bytes_read = 0

    def _serve(self, nbytes: int) -> int:
        start = max(self.shard.now, self.busy_until)
        self.busy_until = start + -(-nbytes // self.bw)
        return start

    def _chunks_ready(self, start: int, nbytes: int) -> list[int]:
        return self.cfg.sizing.chunk_ready(start + self.latency, nbytes, self.bw)

    def on_message(self, msg: m.Message) -> None:
        if msg.kind == m.CONTROL and msg.arg == m.CTRL_LOAD:
            start = self._serve(msg.nbytes)
            self.bytes_read += msg.nbytes
            kind = m.WRITE if msg.flags & m.STREAM else m.APPEND  # a tile buffer, or a buffer that grows
            self.send(kind, msg.mu, ready=self._chunks_ready(start, msg.nbytes), nbytes=msg.nbytes, mu=msg.mu,
                      buf=msg.buf, alloc=msg.alloc, flags=msg.flags)
            return
        if msg.kind in (m.WRITE, m.APPEND):
            start = self._serve(msg.nbytes)
            self.bytes_written += msg.nbytes
            if msg.tag:  # a swap-out its sender waits for: acknowledged once the last byte is written
                done = start + -(-msg.nbytes // self.bw) + self.latency
                self.send(m.ACK, msg.arg, ready=done, tag=msg.tag, mu=msg.mu)
        elif msg.kind == m.READ_REQ:
            start = self._serve(msg.nbytes)
            self.bytes_read += msg.nbytes
            self.send(m.READ_RESP, msg.arg, ready=self._chunks_ready(start, msg.nbytes), nbytes=msg.nbytes,
                      tag=msg.tag, mu=msg.mu)
        elif msg.kind != m.FREE:
            raise RuntimeError(f"DRAM unit {self.uid} cannot handle a {m.KINDS[msg.kind]} message")

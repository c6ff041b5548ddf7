"""DRAM interface unit on the chip's edge: holds evicted buffers' data.

One port of ``dram_bytes_per_cycle`` serves requests in arrival order after
``dram_latency`` cycles. A read forwarded by an MU (for a buffer it evicted) is
answered straight to the unit that asked (``arg``), with the tag it asked with.
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

    def on_message(self, msg: m.Message) -> None:
        if msg.kind in (m.WRITE, m.APPEND):
            self._serve(msg.nbytes)
            self.bytes_written += msg.nbytes
        elif msg.kind == m.READ_REQ:
            start = self._serve(msg.nbytes)
            self.bytes_read += msg.nbytes
            ready, done = [], 0
            for c in self.cfg.sizing.chunk_bytes(msg.nbytes):
                done += c
                ready.append(start + self.latency + -(-done // self.bw))
            self.send(m.READ_RESP, msg.arg, ready=ready, nbytes=msg.nbytes, tag=msg.tag, mu=msg.mu)
        elif msg.kind != m.FREE:
            raise RuntimeError(f"DRAM unit {self.uid} cannot handle a {m.KINDS[msg.kind]} message")

"""Packet heads crossing the cuts between shards of the packet-level NoC."""

from __future__ import annotations

import numpy as np

from sim.noc.ports import PORTS
from sim.traffic import Columnar, column


class PacketBoundary(Columnar):
    """Heads crossing a shard cut: the cycle they bid at the downstream router, the global
    input-port id (router * PORTS + port) they arrive on, packet id, destination, flits."""

    cycle: np.ndarray = column("heads", due=True)
    port: np.ndarray = column("heads")
    pkt: np.ndarray = column("heads")
    dst: np.ndarray = column("heads")
    flits: np.ndarray = column("heads", flits="value")

    def routers(self) -> np.ndarray:
        return self.port // PORTS


def split_packets(out: PacketBoundary, owner: np.ndarray, shards: int) -> list[PacketBoundary]:
    """One PacketBoundary per destination shard (``owner[router]`` = shard)."""
    if not len(out):
        return [PacketBoundary() for _ in range(shards)]
    own = owner[out.routers()]
    return [out.select((own == s,)) for s in range(shards)]

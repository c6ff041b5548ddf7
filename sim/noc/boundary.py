"""Flits and credits crossing the cuts between shards of the cycle-level NoC.

Rows carry global ids: an input VC ``(router * PORTS + port) * vcs + vc`` for a flit (the
buffer it lands in) and an output VC of the same form for a credit (the counter it
replenishes), with the cycle each is due there.
"""

from __future__ import annotations

import numpy as np

from sim.noc.ports import PORTS
from sim.traffic import Columnar, column


class FlitBoundary(Columnar):
    """Flits and credits crossing shard boundaries, with global VC ids and due cycles."""

    flit_cycle: np.ndarray = column("flits", due=True, flits="row")
    flit_ivc: np.ndarray = column("flits")
    flit_pkt: np.ndarray = column("flits")
    flit_dst: np.ndarray = column("flits")
    flit_flag: np.ndarray = column("flits")
    credit_cycle: np.ndarray = column("credits", due=True)
    credit_ovc: np.ndarray = column("credits")


def split_flits(out: FlitBoundary, owner: np.ndarray, vcs: int, shards: int) -> list[FlitBoundary]:
    """One FlitBoundary per destination shard (``owner[router]`` = shard)."""
    if not len(out):
        return [FlitBoundary() for _ in range(shards)]
    pv = PORTS * vcs
    fdst = owner[out.flit_ivc // pv]
    cdst = owner[out.credit_ovc // pv]
    return [out.select((fdst == s, cdst == s)) for s in range(shards)]

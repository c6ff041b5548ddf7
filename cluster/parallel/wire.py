"""One epoch's output of a shard packed into a single int64 array for the wire.

Ray moves one contiguous numpy array between actors several times faster than a
tuple of dataclasses holding many small arrays (measured: 0.6 vs 1.7 ms per epoch
through a compiled graph), so an actor's epoch output travels as::

    [t0, t1, next_event, earliest_out, created, finished, active, safe_until, pause, shards,
     then per destination shard: the row count of each of the model's sections,
        then each section's columns, one after the other]

with "never" (infinity) encoded as NEVER. A model's traffic says how it splits into sections
of equal-length int64 columns (``encode``/``decode``, ``widths``: derived from its declared
columns, sim/traffic.py); the cycle-level NoC's are (flits: cycle, VC, packet, destination,
flags) and (credits: cycle, VC). ``pause`` is set by an actor exchanging directly with its peers
(cluster/parallel/channels.py) that wants to hand control back to the driver after this
epoch; every actor sees every flag, so all of them stop at the same epoch.
"""

from __future__ import annotations

import numpy as np

from cluster.parallel.model import EpochMeta, T
from sim.cycles import NEVER

_HEADER = 10


def _enc(x: float) -> int:
    return NEVER if x == float("inf") else int(x)


def _dec(x: int) -> float:
    return float("inf") if x >= NEVER else float(x)


def pack(meta: EpochMeta, parts: list[T], pause: bool = False) -> np.ndarray:
    head = [meta.t0, meta.t1, _enc(meta.next_event), _enc(meta.earliest_out),
            meta.created, meta.finished, int(meta.active), _enc(meta.safe_until), int(pause), len(parts)]
    chunks = [np.array(head, dtype=np.int64)]
    for b in parts:
        sections = b.encode()
        chunks.append(np.array([len(s[0]) for s in sections], dtype=np.int64))
        for sec in sections:
            chunks += sec
    return np.concatenate(chunks).astype(np.int64, copy=False)


def meta_of(arr: np.ndarray) -> EpochMeta:
    h = arr[:_HEADER].tolist()
    return EpochMeta(h[0], h[1], _dec(h[2]), _dec(h[3]), h[4], h[5], bool(h[6]), _dec(h[7]))


def pauses(arr: np.ndarray) -> bool:
    """Whether the sender asked to hand control back to the driver after this epoch."""
    return bool(arr[8])


def part_of(arr: np.ndarray, i: int, like: T) -> T:
    """The traffic this output addresses to shard ``i``, of ``like``'s type."""
    widths = like.widths()
    k = len(widths)
    pos = _HEADER
    for _ in range(i):
        rows = arr[pos: pos + k]
        pos += k + int(np.dot(rows, widths))
    rows = arr[pos: pos + k].tolist()
    pos += k
    sections = []
    for n, w in zip(rows, widths):
        sections.append([arr[pos + j * n: pos + (j + 1) * n] for j in range(w)])
        pos += n * w
    return like.decode(sections)

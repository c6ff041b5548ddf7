"""A compute unit's part of a collective across the chips of a system (grid fidelity).

Chips of a system run the same mapped plan, so the CU that computes a kernel's slice on
one chip has a peer with the same unit id on every other chip of its group. A
collective over a kernel's output tile is run by each CU on its own share of the tile
(``S`` bytes), with its peers: data travels as POSTED writes (sim/chip/messages.py) that
cross the sender's NoC to an IO unit, the chip network, and the receiver's NoC, and are
taken by the peer's task as the reply it waits for. The algorithms are those of the
box-fidelity collectives (sim/system/collectives.py): the ring all-reduce is a
reduce-scatter then an all-gather, ``p - 1`` steps each of ``S / p`` bytes to the next
chip; each reduce-scatter step adds the received chunk to its own (one add per element on
the CU's lanes and stages); an all-to-all sends ``S / p`` to every other chip directly.
"""

from __future__ import annotations

import math

from sim.chip import messages as m
from sim.chip.units import Compute, Replies

COLLECTIVE = 1 << 61  # tag space of collective steps (request tags count up from 1, credits use 1 << 62)
SIMULATED = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")  # over the TP group


def step_tag(run: int, tile: int, step: int) -> int:
    """Tag of ``step`` of the collective over ``tile`` of partition run ``run``."""
    assert step < 256 and tile < 1 << 20, "a collective's steps and tiles must fit their tag fields"
    return COLLECTIVE | (run << 28) | (tile << 8) | step


def chunk(nbytes: int, p: int) -> int:
    return -(-int(nbytes) // p)


def collective(cu, kind: str, group: tuple[int, ...], chip: int, nbytes: int, run: int, tile: int,
               add_cycles_per_byte: float):
    """Run this CU's part of ``kind`` over ``nbytes`` with its peers on ``group``'s chips."""
    p = len(group)
    if p < 2 or nbytes <= 0:
        return
    i = group.index(chip)
    size = chunk(nbytes, p)
    if kind == "all_to_all":
        for k in range(1, p):  # to the next chip first, then on round the group
            peer = m.remote_unit(group[(i + k) % p], cu.uid)
            cu.send(m.WRITE, peer, nbytes=size, tag=step_tag(run, tile, i), flags=m.POSTED)
        yield Replies([step_tag(run, tile, j) for j in range(p) if j != i], "network")
        return
    reduce_steps = range(p - 1) if kind in ("all_reduce", "reduce_scatter") else range(0)
    first = 0 if kind != "all_gather" else p - 1
    last = 2 * (p - 1) if kind != "reduce_scatter" else p - 1
    nxt = m.remote_unit(group[(i + 1) % p], cu.uid)
    add = math.ceil(size * add_cycles_per_byte)
    for step in range(first, last):
        tag = step_tag(run, tile, step)
        cu.send(m.WRITE, nxt, nbytes=size, tag=tag, flags=m.POSTED)
        yield Replies([tag], "network")
        if step in reduce_steps and add:
            yield Compute(add)

"""Collectives as messages: task helpers a chip's program runs (``yield from``).

Each takes the chip, its group (the chips of one network dimension's group, in ring
order: mapping/topology.py ``SystemGraph.group``), the bytes ``S`` of the collective and a
tag that keeps concurrent collectives apart. The algorithm follows the dimension's link
kind, as mapping/collectives.py charges it, unless the caller names another
(sim/system/algorithms.py: one-shot and recursive doubling, and the choice by size):

- ring (and switch: the ring through the switch): all-reduce as reduce-scatter then
  all-gather, ``p - 1`` steps each, every step sending ``S / p`` to the next chip and
  waiting for the previous chip's chunk (Patarasuk & Yuan 2009);
- fully connected: reduce-scatter and all-gather direct, each chip sending ``S / p`` to each
  of the ``p - 1`` others and waiting for theirs;
- all-to-all: ``S / p`` to each other chip directly (through the switch, or around the
  ring hop by hop);
- point-to-point: one message.

On idle links, with one hop's latency ``L`` and ``B`` bytes per cycle (a chip's port per
dimension sends one message at a time), a ring all-reduce takes ``2 (p - 1) (L + S / (p B))``,
all-gather and reduce-scatter half of it, a direct all-to-all ``(p - 1) S / (p B) + L``.
"""

from __future__ import annotations

from mapping.systems import LinkKind
from sim.system.shard import BoxChip, Recv

STEP = 1 << 12  # tag space of one collective: tag * STEP + its step


def chunk(nbytes: int, p: int) -> int:
    return -(-int(nbytes) // p)


def ring_steps(chip: BoxChip, group: list[int], nbytes: int, tag: int, steps: range):
    """Send a chunk to the next chip and take the previous chip's, ``len(steps)`` times."""
    p = len(group)
    if p < 2:
        return
    i = group.index(chip.cid)
    nxt, prv = group[(i + 1) % p], group[(i - 1) % p]
    size = chunk(nbytes, p)
    for step in steps:
        chip.send(nxt, size, tag * STEP + step)
        yield Recv([(prv, tag * STEP + step)])


def direct_phase(chip: BoxChip, group: list[int], nbytes: int, tag: int, step: int):
    """Send ``S / p`` to every other chip of the group and take each of theirs."""
    others = [c for c in group if c != chip.cid]
    if not others:
        return
    size = chunk(nbytes, len(group))
    for c in others:
        chip.send(c, size, tag * STEP + step)
    yield Recv([(c, tag * STEP + step) for c in others])


def one_shot(chip: BoxChip, group: list[int], nbytes: int, tag: int, step: int):
    """Send all ``S`` bytes to every other chip and take each of theirs (each reduces on its own)."""
    others = [c for c in group if c != chip.cid]
    for c in others:
        chip.send(c, int(nbytes), tag * STEP + step)
    if others:
        yield Recv([(c, tag * STEP + step) for c in others])


def doubling_steps(chip: BoxChip, group: list[int], sizes: list[int], tag: int):
    """Step ``k`` exchanges ``sizes[k]`` bytes with the chip ``2^k`` places away (``p`` a power of two):
    recursive doubling for all-reduce and all-gather, halving (sizes shrinking) for reduce-scatter."""
    i = group.index(chip.cid)
    for k, size in enumerate(sizes):
        peer = group[i ^ (1 << k)]
        chip.send(peer, size, tag * STEP + k)
        yield Recv([(peer, tag * STEP + k)])


def _doubling_sizes(op: str, p: int, nbytes: int) -> list[int]:
    steps = p.bit_length() - 1
    if op == "all_reduce":
        return [int(nbytes)] * steps
    if op == "all_gather":
        return [chunk(nbytes, p) << k for k in range(steps)]
    return [-(-int(nbytes) // (2 << k)) for k in range(steps)]


def legacy(kind: LinkKind) -> str:
    """The algorithm a link kind ran before algorithms were chosen by size: direct on full connections."""
    return "direct" if kind is LinkKind.FULLY_CONNECTED else "ring"


def _reducing(op: str, chip: BoxChip, group: list[int], nbytes: int, tag: int, algorithm: str):
    p = len(group)
    if p < 2:
        return
    phases = 2 if op == "all_reduce" else 1
    if algorithm == "ring":
        yield from ring_steps(chip, group, nbytes, tag, range(phases * (p - 1)))
    elif algorithm == "direct":
        for phase in range(phases):
            yield from direct_phase(chip, group, nbytes, tag, phase)
    elif algorithm == "one-shot" and op == "all_reduce":
        yield from one_shot(chip, group, nbytes, tag, 0)
    elif algorithm == "recursive-doubling" and p & (p - 1) == 0:
        yield from doubling_steps(chip, group, _doubling_sizes(op, p, nbytes), tag)
    else:
        raise ValueError(f"{algorithm!r} does not run {op} over {p} chips")


def all_reduce(chip: BoxChip, group: list[int], nbytes: int, tag: int, kind: LinkKind, algorithm: str = ""):
    yield from _reducing("all_reduce", chip, group, nbytes, tag, algorithm or legacy(kind))


def reduce_scatter(chip: BoxChip, group: list[int], nbytes: int, tag: int, kind: LinkKind, algorithm: str = ""):
    yield from _reducing("reduce_scatter", chip, group, nbytes, tag, algorithm or legacy(kind))


def all_gather(chip: BoxChip, group: list[int], nbytes: int, tag: int, kind: LinkKind, algorithm: str = ""):
    yield from _reducing("all_gather", chip, group, nbytes, tag, algorithm or legacy(kind))


def all_to_all(chip: BoxChip, group: list[int], nbytes: int, tag: int, kind: LinkKind, algorithm: str = ""):
    yield from direct_phase(chip, group, nbytes, tag, 0)


COLLECTIVES = {"all_reduce": all_reduce, "reduce_scatter": reduce_scatter, "all_gather": all_gather,
               "all_to_all": all_to_all}

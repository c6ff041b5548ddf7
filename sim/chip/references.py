"""What a unit holding a reference does: allocate, share, drop, free (task helpers).

``yield from`` these inside a CU task. ``allocate`` asks an MU for a buffer (the reply is
the owner's reference, with the full weight under a weighted protocol); ``share`` gives
copies to other units and ``drop`` lets one go, both as the run's reclamation protocol
says (sim/chip/reclaim); ``free`` is the explicit free of an unshared buffer by its only
holder (``free_all`` waits until the MUs have freed). Every copy and drop is logged to the shadow oracle.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.chip import messages as m
from sim.chip.units import Replies
from sim.memory import oracle


@dataclass
class Ref:
    """A reference: (MU, buffer id), the oracle's shadow allocation id, and its weight."""

    mu: int
    buf: int
    alloc: int
    weight: int = 0


def shadow(ref: Ref) -> int:
    """The allocation id the oracle knows a reference by: another chip's MU's allocations by their
    system-wide id (its chip's own log keeps local ids; sim/memory/oracle.system_log)."""
    if ref.mu < 0:
        return oracle.system_alloc(m.split_remote(ref.mu)[0], ref.alloc)
    return ref.alloc


def _ref(cu, msg: m.Message) -> Ref:
    """The reference an allocation's acknowledgement or a REFERENCE message carries."""
    return Ref(msg.mu, msg.buf, msg.alloc, cu.shard.cfg.reclaim.weight_of(msg.arg))


def fields_of(ref: Ref) -> dict:
    """The message fields that name a reference."""
    return dict(mu=ref.mu, buf=ref.buf, alloc=ref.alloc)


class BufferRefused(RuntimeError):
    """A workload that cannot go on without a buffer its MU refused (a static slot too small for it):
    the run ends here, a finding about the memory policy, not a fault of the simulator."""


def allocate(cu, mu: int, nbytes: int, label: int = 0, flags: int = 0):
    """Task helper: a new buffer at ``mu``; returns its Ref, or None if the MU refused."""
    (ref,) = yield from allocate_many(cu, [(mu, nbytes, label)], flags)
    return ref


def allocate_many(cu, requests: list[tuple[int, int, int]], flags: int = 0):
    """Task helper: several allocations at once ((mu, bytes, label) each); a list of Ref or None.
    ``flags`` (messages.STREAM) asks for tile buffers."""
    tags = [cu.request(m.ALLOC, mu, nbytes=n, arg=label, mu=mu, flags=flags) for mu, n, label in requests]
    got = yield Replies(tags, "memory")
    return [_ref(cu, got[t]) if got[t].status == m.STATUS_OK else None for t in tags]


def share(cu, refs: list[Ref], receivers: list[list[int]], reclaim, tags: list[list[int]] | None = None):
    """Task helper: give ``refs[i]`` to every unit in ``receivers[i]`` (all shares at once).
    ``tags[i][j]`` goes in the tag of the j-th REFERENCE message of ``refs[i]`` (it tells
    the receiver what the reference is for)."""
    yield from reclaim.share(cu, refs, receivers, tags)


def hand_over(cu, refs: list[Ref], receivers: list[list[int]], tags: list[list[int]] | None,
              weights: list[list[int]] | None, increment: bool):
    """Send the REFERENCE messages of a share (each with its weight field, if any), preceded
    by a +1 to the MU for each when ``increment``; log every copy to the oracle."""
    shard = cu.shard
    for i, (r, rc) in enumerate(zip(refs, receivers)):
        for j, dst in enumerate(rc):
            if increment:
                cu.send(m.REF_INC, r.mu, **fields_of(r))
            w = weights[i][j] if weights else 0
            shard.oracle(cu, oracle.COPY, shadow(r))
            shard.trace_instant(cu.uid, "copy reference", {"mu": r.mu, "buffer": r.buf, "to": dst})
            cu.send(m.REFERENCE, dst, arg=w, tag=tags[i][j] if tags else 0, **fields_of(r))
    return
    yield  # a generator, so protocols can ``yield from`` it


def log_drop(cu, ref: Ref) -> None:
    cu.shard.oracle(cu, oracle.DROP, shadow(ref))
    cu.shard.trace_instant(cu.uid, "drop reference", {"mu": ref.mu, "buffer": ref.buf})


def drop(cu, ref: Ref, reclaim) -> None:
    reclaim.drop(cu, ref)


def free(cu, ref: Ref) -> None:
    cu.shard.oracle(cu, oracle.DROP, shadow(ref))
    cu.send(m.FREE, ref.mu, **fields_of(ref))


def free_all(cu, refs: list[Ref]):
    """Task helper: free unshared buffers and wait until their MUs have (each acknowledges a free
    that carries a tag): whoever hears next knows the room is back."""
    tags = []
    for r in refs:
        cu.shard.oracle(cu, oracle.DROP, shadow(r))
        tags.append(cu.request(m.FREE, r.mu, **fields_of(r)))
    if tags:
        yield Replies(tags, "memory")


def received(cu, msg: m.Message) -> Ref:
    """The reference a REFERENCE message hands over."""
    return _ref(cu, msg)

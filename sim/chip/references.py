"""What a unit holding a reference does, under each reclamation protocol.

Task helpers (``yield from`` them inside a CU task):

- ``allocate``: ask an MU for a buffer; the reply is the owner's reference (with the
  full weight under partial-free).
- ``share``: give copies of a reference to other units.
  ``refcount``: send +1 to the MU and the reference to the receiver at once; nothing
  orders the two, so the receiver's later -1 can overtake the +1 in the network.
  ``refcount-gated``: a copy is activated only once the MU has acknowledged its +1:
  the holder sends the +1s, waits for the acknowledgements, then hands the
  references over, so every +1 is counted before the copy can be used, passed on or
  dropped. (The acknowledgement goes to the holder rather than the receiver so that
  the holder's own -1 cannot overtake its +1 either, on a network that may reorder
  packets between the same two units.)
  ``partial-free``: split the holder's weight (no message, allocators' split rules);
  a holder left with weight 1 is topped up by the MU first (one weight request and its
  grant per share, however many top-ups it needs).
- ``drop``: -1 (counting protocols) or return the weight (partial-free).
- ``free``: explicit free of an unshared buffer by its only holder.

Every copy and drop is also logged to the shadow oracle (the truth the counts are
meant to follow).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.chip import messages as m
from sim.chip.units import Replies
from sim.memory import oracle
from sim.memory.weights import from_field, plan_copies, to_field


@dataclass
class Ref:
    mu: int
    buf: int
    alloc: int
    weight: int = 0


def _ref(cu, msg: m.Message) -> Ref:
    """The reference an allocation's acknowledgement or a REFERENCE message carries."""
    return Ref(msg.mu, msg.buf, msg.alloc, from_field(msg.arg, cu.shard.cfg.reclaim.split))


def allocate(cu, mu: int, nbytes: int, label: int = 0):
    """Task helper: a new buffer at ``mu``; returns its Ref, or None if the MU refused."""
    (ref,) = yield from allocate_many(cu, [(mu, nbytes, label)])
    return ref


def allocate_many(cu, requests: list[tuple[int, int, int]]):
    """Task helper: several allocations at once ((mu, bytes, label) each); a list of Ref or None."""
    tags = [cu.request(m.ALLOC, mu, nbytes=n, arg=label, mu=mu) for mu, n, label in requests]
    got = yield Replies(tags, "memory")
    return [_ref(cu, got[t]) if got[t].status == m.STATUS_OK else None for t in tags]


def _fields(ref: Ref) -> dict:
    return dict(mu=ref.mu, buf=ref.buf, alloc=ref.alloc)


def share(cu, refs: list[Ref], receivers: list[list[int]], reclaim, tags: list[list[int]] | None = None):
    """Task helper: give ``refs[i]`` to every unit in ``receivers[i]`` (all shares at once).
    ``tags[i][j]`` goes in the tag of the j-th REFERENCE message of ``refs[i]`` (it tells
    the receiver what the reference is for)."""
    proto = reclaim.protocol
    shard = cu.shard
    if proto == "refcount-gated":
        acks = [cu.request(m.REF_INC, r.mu, **_fields(r)) for r, rc in zip(refs, receivers) for _ in rc]
        if acks:
            yield Replies(acks, "sync")
    weights: list[tuple[int, ...]] = []
    if proto == "partial-free":
        plans = [plan_copies(r.weight, len(rc), reclaim.split, reclaim.weight_bits) for r, rc in zip(refs, receivers)]
        grants = [cu.request(m.WEIGHT_REQ, r.mu, arg=p.topups, **_fields(r)) for r, p in zip(refs, plans) if p.topups]
        if grants:
            yield Replies(grants, "sync")
        for r, p in zip(refs, plans):
            r.weight = p.keep
            weights.append(p.gives)
    for i, (r, rc) in enumerate(zip(refs, receivers)):
        for j, dst in enumerate(rc):
            if proto == "refcount":
                cu.send(m.REF_INC, r.mu, **_fields(r))
            w = to_field(weights[i][j], reclaim.split) if weights else 0
            shard.oracle(cu, oracle.COPY, r.alloc)
            shard.trace_instant(cu.uid, "copy reference", {"mu": r.mu, "buffer": r.buf, "to": dst})
            cu.send(m.REFERENCE, dst, arg=w, tag=tags[i][j] if tags else 0, **_fields(r))


def drop(cu, ref: Ref, reclaim) -> None:
    cu.shard.oracle(cu, oracle.DROP, ref.alloc)
    cu.shard.trace_instant(cu.uid, "drop reference", {"mu": ref.mu, "buffer": ref.buf})
    if reclaim.protocol == "partial-free":
        cu.send(m.WEIGHT_RETURN, ref.mu, arg=to_field(ref.weight, reclaim.split), **_fields(ref))
        ref.weight = 0
    else:
        cu.send(m.REF_DEC, ref.mu, **_fields(ref))


def free(cu, ref: Ref) -> None:
    cu.shard.oracle(cu, oracle.DROP, ref.alloc)
    cu.send(m.FREE, ref.mu, **_fields(ref))


def received(cu, msg: m.Message) -> Ref:
    """The reference a REFERENCE message hands over."""
    return _ref(cu, msg)

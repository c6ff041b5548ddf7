"""A data-dependent all-to-all between chips of a system (grid fidelity), landing in buffers the
receiving chips allocate: MoE expert parallelism's dispatch and combine.

Each chip of a group sends each other chip exactly its tokens routed there (``send[h]`` tokens
of ``token_bytes``), so the sizes come from the routing, not from a padded equal share. The
rendezvous is the usual one for receiver-allocated buffers (as RDMA rendezvous protocols do):

1. the receiver knows what each peer sends it without a header message: the routing is a pure
   function of (seed, tile), drawn identically on every chip, so both ends compute the same
   counts (a header would cost a link latency more per tile and tell nothing new);
2. it allocates one landing buffer per sending peer in one of its MUs, through the run's memory
   policy: a policy that grows buffers (virtual: a block at a time as data arrives; realloc-copy:
   by copying into a bigger region) gets an empty buffer the sender's appends grow; a policy of
   fixed slots (static-*) is asked for the worst case the peer could send (``bound``), and if no
   slot holds that the allocation runs out of memory as the run's ``memory.on_oom`` says (stall,
   evict, fail); data never exceeds the worst case, so a granted slot never overflows;
3. it hands the buffer's reference to the peer's unit under the run's reclamation protocol
   (a count +1, gated on its acknowledgement, or a share of the weight): the reference crosses
   the chip network like any message (sim/chip/io.py translates the MU's id);
4. the sender appends its tokens to the remote buffer a packet's worth at a time (writes need no
   reply) and drops its reference: the -1 or the weight return crosses back to the MU;
5. the receiver reads the whole buffer (the read waits at the MU until every byte has landed),
   drops its reference, and the protocol frees the buffer once both holders have let go.

A failed allocation (``on_oom = "fail"``) is reported to the sender by a REFERENCE with a failed
status, so it sends nothing and nobody waits forever.
"""

from __future__ import annotations

import numpy as np

from sim.chip import messages as m
from sim.chip.records import LANDING, LandingLife
from sim.chip.references import allocate_many, drop, fields_of, received, share
from sim.chip.units import Replies

LANDING_TAG = 1 << 59  # tag space of landing references (collectives use 1 << 61, credits 1 << 62)


def landing_tag(run: int, tile: int, receiver: int) -> int:
    """Tag of the landing reference group member ``receiver`` hands a sender for ``tile`` of ``run``."""
    assert receiver < 256 and tile < 1 << 20, "the receiver and tile must fit their tag fields"
    return LANDING_TAG | (run << 28) | (tile << 8) | receiver


def is_landing(msg: m.Message) -> bool:
    return msg.kind == m.REFERENCE and bool(msg.tag & LANDING_TAG)


def take_landing_reference(cu, msg: m.Message) -> None:
    """A landing reference reached the sender: hand it to the task waiting for its tag (as a reply)."""
    msg.flags |= m.POSTED
    cu.on_message(msg)


def fixed_slots(cfg) -> bool:
    """Does the run's memory policy give every buffer the same room (static-*)? Then a landing
    buffer is asked for the worst case; else it starts empty and grows as data lands."""
    room = cfg.policy.room(cfg.mu)
    return 0 < room.minimum == room.largest


def token_owners(tokens: int, chips: int) -> np.ndarray:
    """Group index of the chip holding each token of a tile: contiguous near-equal blocks."""
    return np.arange(tokens) * chips // tokens


def exchange_counts(routes: np.ndarray, chips: int, experts: int) -> np.ndarray:
    """[chips, chips] token copies group member g routes to experts living on member h (experts
    in contiguous blocks of ``experts / chips``), from a tile's [tokens, top_k] routes."""
    owner = np.repeat(token_owners(len(routes), chips), routes.shape[1])
    dest = routes.ravel() // (experts // chips)
    return np.bincount(owner * chips + dest, minlength=chips * chips).reshape(chips, chips).astype(np.int64)


def exchange(cu, group: tuple[int, ...], chip: int, send: list[int], recv: list[int], bound: list[int],
             token_bytes: int, mu: int, fixed: bool, run: int, tile: int, reclaim, packet: int):
    """This CU's part of the all-to-all with its peers (same unit id) on ``group``'s chips: ``send[h]``
    tokens to member h, ``recv[h]`` from it (landing in ``mu``; ``bound[h]`` tokens at most).
    ``fixed``: the policy gives fixed slots (ask for the bound). Returns False if a landing failed."""
    me = group.index(chip)
    peers = [h for h in range(len(group)) if h != me]
    incoming = [h for h in peers if recv[h] > 0]
    reqs = [(mu, bound[h] * token_bytes if fixed else 0, LANDING) for h in incoming]
    refs = (yield from allocate_many(cu, reqs)) if reqs else []
    ok = True
    for h, ref in zip(incoming, refs):
        if ref is None:  # out of memory under on_oom = fail: the sender must not wait for a buffer
            ok = False
            cu.send(m.REFERENCE, m.remote_unit(group[h], cu.uid), tag=landing_tag(run, tile, me),
                    status=m.STATUS_FAILED)
    landed = [(h, r) for h, r in zip(incoming, refs) if r is not None]
    if landed:
        yield from share(cu, [r for _, r in landed], [[m.remote_unit(group[h], cu.uid)] for h, _ in landed],
                         reclaim, [[landing_tag(run, tile, me)] for _ in landed])
    outgoing = [h for h in peers if send[h] > 0]
    if outgoing:
        tags = [landing_tag(run, tile, h) for h in outgoing]
        got = yield Replies(tags, "network")
        per = max(token_bytes, packet // token_bytes * token_bytes)  # whole tokens, a packet's worth
        for tag, h in zip(tags, outgoing):
            msg = got[tag]
            if msg.status != m.STATUS_OK:
                continue
            ref = received(cu, msg)
            left = send[h] * token_bytes
            while left > 0:
                n = min(per, left)
                cu.send(m.APPEND, ref.mu, nbytes=n, **fields_of(ref))
                left -= n
            drop(cu, ref, reclaim)
    if landed:
        reads = [cu.request(m.READ_REQ, r.mu, nbytes=recv[h] * token_bytes, arg=recv[h] * token_bytes,
                            **fields_of(r)) for h, r in landed]
        got = yield Replies(reads, "network")
        ok = ok and all(got[t].status == m.STATUS_OK for t in reads)
        for _, r in landed:
            drop(cu, r, reclaim)
    return ok


def landing_figures(landed: list[LandingLife]) -> dict:
    """What landed in a chip's landing buffers, and what its memory policy held for them."""
    return {"landing_buffers": len(landed), "landing_bytes": sum(r.nbytes for r in landed),
            "landing_reserved_bytes": sum(r.reserved for r in landed),
            "landing_reserved_peak": max(r.reserved for r in landed)}

"""Prefix sharing: requests whose prompts begin with the same blocks share those blocks' KV,
each shared reference counted by the run's reclamation protocol.

A trace that gives its prompts' blocks (Mooncake, Qwen-Bailian ``hash_ids``; prefix_blocks.py)
splits a sequence's KV, per layer, head and K/V, into its **prefix blocks** (one buffer each,
``block_tokens`` tokens: the trace's block or a multiple, ``workload.decode.prefix_block_tokens``)
and its **tail** (the rest of the prompt and every generated token, growing as before). A
prompt's shareable blocks are those that end before its last token: vLLM v1 recomputes at
least the last prompt token (its logits), so a prompt of n tokens shares at most
``(n - 1) // block_tokens`` blocks.

The scheduler keeps the index (``PrefixIndex``), as vLLM's block pool does: one reference to
every block some running sequence holds, found by the block's prefix id. Admitting a sequence,
it counts the leading blocks it finds (the **hits**), tells the worker how many
(``CTRL_ADMIT``'s ``status``) and shares its references with it through the protocol
(``share``: +1 messages, gated ones, or a split weight); the worker writes the blocks it does
not find, and shares them with the scheduler in turn once written. A sequence that ends, is
refused or is preempted drops every block reference it holds (``drop``: -1, a weight return);
when a block's last running sequence is gone the scheduler drops its own, so the buffer is
freed by the last holder's drop, as the protocol decides; the shadow oracle sees every copy
and drop. By default nothing keeps a block no sequence holds, so the hits are those of
sequences running at the same time; ``memory.prefix_cache_bytes`` lets the index keep such
blocks (its reference) up to that many KV bytes, the least recently released dropped first, a
finished request's blocks released last block first (vLLM v1's order), and under memory-aware
admission given back when a waiting request needs the room (scheduling/slot.py).

A hit saves prefill work: the hit blocks' KV is neither computed nor written (the toy
prefill prices a prompt as its KV writes plus one token's attention over it, so the saving
is the writes: fewer bytes over the NoC and through the MU ports), and memory: the block is
held once however many sequences read it (``kv_bytes_saved``). Each step reads every prefix
block a sequence holds as well as its tail.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from typing import Any, ClassVar

import numpy as np

from sim.chip.records import buffer_label
from sim.chip.references import Ref, received, share
from sim.chip.units import Replies

KV_PREFIX = buffer_label(10, "kv-prefix")


@dataclass(frozen=True, slots=True)
class PrefixLog:
    """One request's first admission under prefix sharing, as its scheduler saw it."""

    request: int
    blocks: int  # shareable blocks of its prompt, in the trace's blocks
    hit_blocks: int  # of them, found held by running sequences or the cache (the trace's blocks)
    hit_bytes: int  # KV bytes of the hit blocks (all layers, heads, K and V): not computed or written
    saved_bytes: int  # KV bytes running sequences share beyond one copy each, just after this admission

    HASHED: ClassVar[bool] = False  # a view of messages the result hash covers

    def row(self) -> tuple:
        return astuple(self)


def prefix_figures(logs: list[PrefixLog]) -> dict[str, Any]:
    """The run summary's prefix-sharing figures (None where the run shared no prefixes)."""
    if not logs:
        return {k: None for k in ("prefix_blocks", "prefix_hit_blocks", "prefix_hit_rate", "prefix_hit_bytes",
                                  "kv_bytes_saved")}
    blocks = sum(x.blocks for x in logs)
    hits = sum(x.hit_blocks for x in logs)
    return {"prefix_blocks": blocks, "prefix_hit_blocks": hits, "prefix_hit_rate": hits / blocks if blocks else 0.0,
            "prefix_hit_bytes": sum(x.hit_bytes for x in logs), "kv_bytes_saved": max(x.saved_bytes for x in logs)}


def leading(ids, held) -> int:
    """How many of a request's blocks, from its first, an index holds (``held``: by prefix id): its
    hits, as vLLM's prefix cache finds them (the first miss ends the prefix)."""
    k = 0
    while k < len(ids) and int(ids[k]) in held:
        k += 1
    return k


def shareable_ids(blocks, seq: int, prompt: int, block_tokens: int) -> np.ndarray:
    """Prefix ids of the simulated blocks a request may share: ``block_tokens`` tokens each (a
    whole number of the trace's blocks; a block is named by the id of its last trace block), those
    ending before the prompt's last token."""
    group = block_tokens // blocks.block_tokens
    ids = blocks.of(seq)[group - 1::group]
    return ids[: max(prompt - 1, 0) // block_tokens]


@dataclass
class SharedBlock:
    """A block the index holds: its buffers' references (one per layer, head, K/V) and the running
    sequences holding it."""

    refs: list[Ref]
    holders: int


@dataclass
class Holding:
    """One admission's prefix at the scheduler: its blocks' ids, how many it found, and the blocks
    its worker wrote (their references arriving, or registered)."""

    seq: int
    ids: list[int]
    hits: int
    live: bool = True
    arrived: dict[int, dict[int, Ref]] = field(default_factory=dict)  # block -> buffer -> reference
    registered: set[int] = field(default_factory=set)  # blocks it wrote that the index now holds

    @property
    def own(self) -> list[int]:
        """Blocks it wrote that only it holds (not, or not yet, in the index)."""
        return [j for j in range(self.hits, len(self.ids)) if j not in self.registered]


class PrefixIndex:
    """The scheduler's index of shared prefix blocks (one per run, on the scheduler CU)."""

    def __init__(self, reclaim, buffers: int, block_tokens: int, trace_block_tokens: int, token_bytes: int,
                 stride: int, cache_bytes: int = 0) -> None:
        self.reclaim = reclaim
        self.nb = buffers  # buffers a block has (2 x layers x heads)
        self.block_tokens = block_tokens
        self.group = block_tokens // trace_block_tokens
        self.block_bytes = block_tokens * token_bytes  # data of one buffer of a block
        self.stride = stride  # a written block's reference tag: admission x stride + block x buffers + buffer
        self.blocks: dict[int, SharedBlock] = {}
        self.admissions: dict[int, Holding] = {}  # admission tag -> its holding
        self.live: dict[int, int] = {}  # sequence -> the tag of its admission that holds blocks
        self.saved = 0  # KV bytes held by more than one running sequence, beyond the first copy
        self.per_block = self.block_bytes * buffers  # KV bytes of a block (every layer, head, K and V)
        self.cache_bytes = cache_bytes  # memory.prefix_cache_bytes: blocks no sequence holds, kept
        self.cached: dict[int, None] = {}  # those blocks, least recently used first
        self.cached_bytes = 0

    # ------------------------------------------------------------------ admission
    def hits(self, ids) -> int:
        """Leading blocks of ``ids`` the index holds."""
        return leading(ids, self.blocks)

    def admit(self, tag: int, seq: int, ids, k: int) -> list[SharedBlock]:
        """Admission ``tag`` of ``seq`` holds the first ``k`` blocks of ``ids``; their entries."""
        ids = [int(x) for x in ids]
        self.admissions[tag] = Holding(seq, ids, k)
        self.live[seq] = tag
        got = [self.blocks[i] for i in ids[:k]]
        for i, b in zip(ids, got):
            if b.holders:
                self.saved += self.per_block  # one more sequence reads the one copy
            else:  # kept by the cache: held again
                del self.cached[i]
                self.cached_bytes -= self.per_block
            b.holders += 1
        return got

    def log(self, seq: int, tag: int) -> PrefixLog:
        h = self.admissions[tag]
        return PrefixLog(seq, len(h.ids) * self.group, h.hits * self.group, h.hits * self.per_block, self.saved)

    # ------------------------------------------------------------------ the worker's blocks
    def arrived(self, cu, msg) -> None:
        """A reference to a block a worker wrote: once all its buffers' are in, the index holds the
        block, unless it holds one already (another sequence wrote it first) or the admission has
        ended: then the references are dropped at once."""
        tag, rest = divmod(msg.tag, self.stride)
        j, b = divmod(rest, self.nb)
        h = self.admissions.get(tag)
        if h is None:  # its admission ended and is forgotten: nothing will hold it here
            self.reclaim.drop(cu, received(cu, msg))
            return
        refs = h.arrived.setdefault(j, {})
        refs[b] = received(cu, msg)
        if len(refs) < self.nb:
            return
        del h.arrived[j]
        got = [refs[i] for i in range(self.nb)]
        bid = h.ids[j]
        if not h.live or bid in self.blocks:
            for r in got:
                self.reclaim.drop(cu, r)
        else:
            self.blocks[bid] = SharedBlock(got, 1)
            h.registered.add(j)
        self._forget(tag)

    # ------------------------------------------------------------------ the end of an admission
    def release(self, cu, seq: int) -> None:
        """``seq``'s admission ended (served, refused or preempted; its worker has dropped its
        references): a block no running sequence holds any more is dropped by the index too."""
        tag = self.live.pop(seq, None)
        if tag is None:
            return
        h = self.admissions[tag]
        h.live = False
        # last block first: a prompt's leading blocks are dropped from the cache last, as vLLM v1 frees
        # a request's blocks in reverse order ("so that the tail blocks are evicted first")
        for j in sorted(list(range(h.hits)) + sorted(h.registered), reverse=True):
            bid = h.ids[j]
            blk = self.blocks[bid]
            blk.holders -= 1
            if blk.holders:
                self.saved -= self.per_block
            else:  # kept for a later request (the cache), most recently used last, within its bytes
                self.cached[bid] = None
                self.cached_bytes += self.per_block
        self.trim(cu, self.cache_bytes)
        self._forget(tag)

    def trim(self, cu, most: int) -> None:
        """Drop the least recently used blocks no sequence holds until they hold at most ``most``
        bytes (0: every one): the index's drop is then the last, and the protocol frees them."""
        while self.cached_bytes > most:
            bid = next(iter(self.cached))
            del self.cached[bid]
            self.cached_bytes -= self.per_block
            for r in self.blocks.pop(bid).refs:
                self.reclaim.drop(cu, r)

    def _forget(self, tag: int) -> None:
        """An ended admission with no block half arrived is kept no longer (a reference of it that
        still comes is dropped on arrival): the index holds running sequences' state only."""
        h = self.admissions[tag]
        if not h.live and not h.arrived:
            del self.admissions[tag]

    # ------------------------------------------------------------------ the scheduler's books
    def own(self, seq: int) -> list[int]:
        """Blocks ``seq`` wrote that the index does not hold (yet): charged to it."""
        tag = self.live.get(seq)
        return self.admissions[tag].own if tag is not None else []

    def held(self, room, into: dict[int, int]) -> None:
        """Add the room of every block the index holds, once, at its buffers' MUs."""
        per = room.reserve(self.block_bytes)
        for blk in self.blocks.values():
            for r in blk.refs:
                into[r.mu] = into.get(r.mu, 0) + per


# ---------------------------------------------------------------------- the worker's side
def take_shared(cu, count: int):
    """Task: the ``count`` references the scheduler shares with this worker for its admission, by
    tag (REFERENCE messages reach the worker through ``inbox``, possibly before the admission)."""
    box = cu.state.setdefault("inbox", {})
    if len(box) < count:
        cu.tags += 1
        cu.state["awaiting"] = (count, cu.tags)
        yield Replies([cu.tags], "sync")
    got = cu.state.pop("inbox")
    return [got[t] for t in sorted(got)]


def inbox(cu, msg) -> None:
    """A reference the scheduler shares with this worker: kept until the admission takes it."""
    box = cu.state.setdefault("inbox", {})
    box[msg.tag] = received(cu, msg)
    w = cu.state.get("awaiting")
    if w is not None and len(box) >= w[0]:
        del cu.state["awaiting"]
        cu.signal(w[1])


def share_written(cu, index_unit: int, refs: list[Ref], tags: list[int], reclaim):
    """Task: give the scheduler a reference to each buffer of the blocks this worker wrote."""
    if refs:
        yield from share(cu, refs, [[index_unit]] * len(refs), reclaim, [[t] for t in tags])

"""partial-free: weighted reference counting (Bevan 1987; Watson & Watson 1987).

The MU hands out a total weight with a buffer's first reference; a copy splits its
holder's weight with no message (``split``: ``halve``, ``one``, or ``log2``: half of a power
of two, weights travelling as exponents); a holder returns its weight when done; the MU
frees the buffer once the weight collected equals the weight handed out. A holder left
with weight 1 cannot split: it borrows, the MU topping it up to the full weight (one weight
request and its grant per share, however many top-ups it needs). allocators/weights.py
defines the rules on one object; sim/memory/weights.py splits them between holder and MU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim.chip import messages as m
from sim.chip.reclaim import RECLAMATIONS
from sim.chip.references import fields_of, hand_over, log_drop
from sim.chip.units import Replies
from sim.keys import Field, Issue
from sim.memory import oracle
from sim.memory.weights import SPLITS, UNSPLITTABLE, from_field, max_weight, plan_copies, to_field, weight_problem


@RECLAMATIONS.register("partial-free")
@dataclass(frozen=True)
class Weighted:
    name: str = "partial-free"
    weight_bits: int = 8
    split: str = "halve"
    on_unsplittable: str = "borrow"

    KEYS: ClassVar[dict[str, Field]] = {
        "weight_bits": Field("int", 8, "partial-free: bits of a reference's weight", min=1, max=62),
        "split": Field("choice", "halve", "partial-free: a copy takes half, one unit, or half of a power of two "
                       "(log2: weights stored as exponents)", choices=SPLITS),
        "on_unsplittable": Field("choice", "borrow", "partial-free: a holder with weight 1 borrows from the MU",
                                 choices=UNSPLITTABLE),
    }

    @classmethod
    def from_config(cls, name: str, memory: dict) -> "Weighted":
        return cls(name, **{k: memory[k] if memory.get(k) is not None else f.default for k, f in cls.KEYS.items()})

    def problems(self) -> list[Issue]:
        why = weight_problem(self.weight_bits, self.split)
        return [Issue("memory.weight_bits", why)] if why else []

    @property
    def ref_weight_bits(self) -> int:
        return self.weight_bits

    @property
    def full_weight(self) -> int:
        return max_weight(self.weight_bits, self.split)

    def first_weight(self) -> tuple[int, int]:
        w = self.full_weight
        return w, to_field(w, self.split)

    def weight_of(self, value: int) -> int:
        return from_field(value, self.split)

    # ---------------------------------------------------------------- holder side
    def share(self, cu, refs, receivers, tags):
        plans = [plan_copies(r.weight, len(rc), self.split, self.weight_bits) for r, rc in zip(refs, receivers)]
        grants = [cu.request(m.WEIGHT_REQ, r.mu, arg=p.topups, **fields_of(r)) for r, p in zip(refs, plans) if p.topups]
        if grants:
            yield Replies(grants, "sync")
        weights = []
        for r, p in zip(refs, plans):
            r.weight = p.keep
            weights.append([to_field(g, self.split) for g in p.gives])
        yield from hand_over(cu, refs, receivers, tags, weights, increment=False)

    def drop(self, cu, ref) -> None:
        log_drop(cu, ref)
        cu.send(m.WEIGHT_RETURN, ref.mu, arg=to_field(ref.weight, self.split), **fields_of(ref))
        ref.weight = 0

    # ---------------------------------------------------------------- MU side
    def mu_handlers(self):
        return {m.WEIGHT_RETURN: self._weight_return, m.WEIGHT_REQ: self._weight_request}

    def _weight_return(self, mu, msg) -> None:
        rec = mu.lookup(msg)
        mu.shard.trace_instant(mu.uid, "weight return", {"buffer": msg.buf, "from": msg.src})
        if rec is None:
            mu.shard.oracle(mu, oracle.FREE, msg.alloc)
            return
        rec.collected += from_field(msg.arg, self.split)
        if rec.collected >= rec.total:
            mu.release(rec, "weight")

    def _weight_request(self, mu, msg) -> None:
        """A holder with weight 1 asks for ``arg`` top-ups to the full weight."""
        rec = mu.lookup(msg)
        grant = msg.arg * (self.full_weight - 1)
        mu.stats.weight_topups += msg.arg
        mu.shard.trace_instant(mu.uid, "weight request", {"buffer": msg.buf, "top-ups": msg.arg})
        if rec is not None:
            rec.total += grant
        mu.stats.sync_acks += 1
        mu.reply(msg, buf=msg.buf, alloc=msg.alloc, arg=msg.arg)

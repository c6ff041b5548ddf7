"""Counter-based reference counting: +1 and -1 messages to the buffer's MU.

``refcount``: a holder sends +1 to the MU and the reference to the receiver at once;
nothing orders the two, so the receiver's later -1 can overtake the +1 in the network and
free a buffer that is still referenced (the simulator reproduces it: workload ``race``).
``refcount-gated``: a copy is activated only once the MU has acknowledged its +1: the
holder sends the +1s, waits for the acknowledgements, then hands the references over, so
every +1 is counted before the copy can be used, passed on or dropped. (The
acknowledgement goes to the holder rather than the receiver so that the holder's own -1
cannot overtake its +1 either, on a network that may reorder packets between two units.)
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


@RECLAMATIONS.register("refcount-gated")
@RECLAMATIONS.register("refcount")
@dataclass(frozen=True)
class Counting:
    name: str = "refcount-gated"

    KEYS: ClassVar[dict[str, Field]] = {}

    @classmethod
    def from_config(cls, name: str, memory: dict) -> "Counting":
        return cls(name)

    @property
    def gated(self) -> bool:
        return self.name == "refcount-gated"

    def problems(self) -> list[Issue]:
        return []

    @property
    def ref_weight_bits(self) -> int:
        return 0

    def first_weight(self) -> tuple[int, int]:
        return 0, 0

    def weight_of(self, value: int) -> int:
        return value

    # ---------------------------------------------------------------- holder side
    def share(self, cu, refs, receivers, tags):
        if self.gated:
            acks = [cu.request(m.REF_INC, r.mu, **fields_of(r)) for r, rc in zip(refs, receivers) for _ in rc]
            if acks:
                yield Replies(acks, "sync")
        yield from hand_over(cu, refs, receivers, tags, None, increment=not self.gated)

    def drop(self, cu, ref) -> None:
        log_drop(cu, ref)
        cu.send(m.REF_DEC, ref.mu, **fields_of(ref))

    # ---------------------------------------------------------------- MU side
    def mu_handlers(self):
        return {m.REF_INC: self._ref_inc, m.REF_DEC: self._ref_dec}

    def _ref_inc(self, mu, msg) -> None:
        rec = mu.lookup(msg)
        mu.shard.trace_instant(mu.uid, "ref +1", {"buffer": msg.buf, "from": msg.src})
        if rec is not None:
            rec.count += 1
        if self.gated:
            mu.stats.sync_acks += 1
            mu.reply(msg, buf=msg.buf, alloc=msg.alloc)

    def _ref_dec(self, mu, msg) -> None:
        rec = mu.lookup(msg)
        mu.shard.trace_instant(mu.uid, "ref -1", {"buffer": msg.buf, "from": msg.src})
        if rec is None:
            mu.shard.oracle(mu, oracle.FREE, msg.alloc)  # the count of a freed buffer hits zero again
            return
        rec.count -= 1
        if rec.count <= 0:
            mu.release(rec, "refcount")

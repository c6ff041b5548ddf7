"""Weighted reference counting (partial free): copies split weight locally, frees need no count.

The owner (an MU) hands out a total weight with the first reference. Copying a reference
splits its holder's weight between the two without any message; dropping one returns its
weight to the owner (one message). The owner frees the buffer when the weight still out
reaches zero, i.e. when everything it handed out has come back. Invariant (conservation):
weight still out at the owner == sum of the weights of the live references.

A weight field is ``bits`` wide. Split strategies:

- ``halve``: the copy takes half (rounded down), the holder keeps the rest;
- ``one``: the copy takes a single unit (cheap to split, many units to return);
- ``log2``: weights are powers of two stored as their exponent (Watson & Watson 1987),
  a ``bits``-bit field holds exponents up to 2^bits - 1, a copy halves the weight.

A holder whose weight cannot be split (weight 1) first borrows more from the owner: a
request and a grant, two messages, after which the owner has more weight out.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from allocators.errors import AllocatorError, InputError

STRATEGIES = ("halve", "one", "log2")


@dataclass
class Reference:
    """One holder's reference and the weight it carries."""

    id: int
    weight: int
    live: bool = True


class WeightedBuffer:
    """Owner-side state of one buffer plus its live references (for checking the invariant)."""

    def __init__(self, bits: int = 8, strategy: str = "halve", owner_bits: int | None = None):
        if strategy not in STRATEGIES:
            raise InputError(f"unknown split strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if bits < 1 or (strategy != "log2" and bits < 2):
            raise InputError(f"weight field of {bits} bit(s) is too narrow for strategy {strategy!r}")
        self.bits, self.strategy = bits, strategy
        # the largest weight one reference can hold (a power of two)
        self.max_weight = 1 << ((1 << bits) - 1) if strategy == "log2" else 1 << (bits - 1)
        self.owner_bits = owner_bits if owner_bits is not None else self.max_weight.bit_length() + 16
        self.out = 0           # weight handed out and not yet returned
        self.messages = 0      # messages to and from the owner
        self.borrows = 0
        self.freed = False
        self.references: dict[int, Reference] = {}
        self._ids = itertools.count()

    @property
    def total_weight(self) -> int:
        """Weight handed out with the first reference: the largest weight a field holds."""
        return self.max_weight

    def create(self) -> Reference:
        """The first reference, carrying the total weight (the owner sets its count; no message)."""
        if self.references or self.freed:
            raise AllocatorError("the buffer already has its first reference")
        self.out = self.max_weight
        return self._new(self.max_weight)

    def copy(self, holder: Reference) -> Reference:
        """A new reference carved out of ``holder``'s weight; borrows first if it cannot split."""
        self._check_live(holder)
        if holder.weight == 1:
            self._borrow(holder)
        if self.strategy == "one":
            given = 1
        else:  # halve, and log2 (a power of two halves into two powers of two)
            given = holder.weight // 2
        holder.weight -= given
        return self._new(given)

    def drop(self, holder: Reference) -> bool:
        """Return the holder's weight to the owner (one message); True if this freed the buffer."""
        self._check_live(holder)
        holder.live = False
        del self.references[holder.id]
        self.out -= holder.weight
        self.messages += 1
        if self.out == 0:
            self.freed = True
        return self.freed

    def check(self) -> None:
        """Conservation: weight out at the owner equals the weight the live references carry."""
        carried = sum(r.weight for r in self.references.values())
        if carried != self.out:
            raise AllocatorError(f"weight not conserved: owner has {self.out} out, references carry {carried}")
        if self.freed != (not self.references and self.out == 0 and self.messages > 0):
            raise AllocatorError("freed flag disagrees with the live references")

    # ---------------------------------------------------------------- internals
    def _new(self, weight: int) -> Reference:
        if self.strategy == "log2" and weight & (weight - 1):
            raise AllocatorError(f"log2 weights must be powers of two, got {weight}")
        ref = Reference(next(self._ids), weight)
        self.references[ref.id] = ref
        return ref

    def _borrow(self, holder: Reference) -> None:
        """Unsplittable weight: the owner tops the holder up to the largest weight (two messages)."""
        grant = self.max_weight - holder.weight
        if (self.out + grant).bit_length() > self.owner_bits:
            raise AllocatorError(f"owner weight counter ({self.owner_bits} bits) would overflow "
                                 f"granting {grant} more to reference {holder.id}")
        holder.weight += grant
        self.out += grant
        self.messages += 2
        self.borrows += 1

    def _check_live(self, holder: Reference) -> None:
        if self.freed:
            raise AllocatorError(f"use of reference {holder.id} after the buffer was freed")
        if not holder.live or holder.id not in self.references:
            raise AllocatorError(f"reference {holder.id} was already dropped")

"""Weighted reference counting (partial-free) as the distributed units do it.

allocators/weights.py defines the protocol on one object that sees owner and holders
together (``WeightedBuffer``): the owner hands out ``max_weight`` with the first
reference, a copy takes a share of its holder's weight (``halve``: half, rounded down;
``one``: a single unit; ``log2``: half of a power of two), a holder with weight 1
first borrows, the owner topping it up to ``max_weight``, and the owner frees when all
weight has come back. Here owner and holders are different units, so the same rules
are split in two: the holder plans its copies (``plan_copies``: the weights kept and
given, and how many top-ups to borrow, which costs a weight request and a grant), the
MU only adds up weight (its total and collected registers). ``log2`` weights travel as
their exponent, so a ``bits``-bit field is what the message carries.
"""

from __future__ import annotations

from dataclasses import dataclass

from allocators.weights import STRATEGIES, WeightedBuffer

SPLITS = STRATEGIES
UNSPLITTABLE = ("borrow",)


def max_weight(bits: int, strategy: str) -> int:
    """The weight a new buffer's first reference carries (allocators' WeightedBuffer)."""
    return WeightedBuffer(bits, strategy).max_weight


def weight_problem(bits: int, strategy: str) -> str | None:
    """Why (bits, strategy) is unusable, or None."""
    try:
        WeightedBuffer(bits, strategy)
    except ValueError as exc:
        return str(exc)
    return None


def given(weight: int, strategy: str) -> int:
    """Weight a copy takes from a holder of ``weight`` > 1 (WeightedBuffer.copy's rule)."""
    return 1 if strategy == "one" else weight // 2


@dataclass(frozen=True)
class CopyPlan:
    keep: int  # the holder's weight after the copies
    gives: tuple[int, ...]  # each copy's weight
    topups: int  # times the holder had weight 1 and was topped up to max_weight


def plan_copies(weight: int, copies: int, strategy: str, bits: int) -> CopyPlan:
    """``copies`` successive copies of a reference holding ``weight``."""
    top = max_weight(bits, strategy)
    gives, topups = [], 0
    for _ in range(copies):
        if weight == 1:
            weight = top
            topups += 1
        g = given(weight, strategy)
        gives.append(g)
        weight -= g
    return CopyPlan(weight, tuple(gives), topups)


def to_field(weight: int, strategy: str) -> int:
    """What a message carries for ``weight``: the exponent under log2, else the weight."""
    return weight.bit_length() - 1 if strategy == "log2" else weight


def from_field(value: int, strategy: str) -> int:
    return 1 << value if strategy == "log2" else value

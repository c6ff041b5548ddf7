"""The narrowest weight field with which a fan-out never borrows (weighted reference counting).

A buffer's owner hands its first holder the full weight of a ``bits``-bit field
(allocators/weights.py: ``2^(bits-1)`` under ``halve`` and ``one``, ``2^(2^bits - 1)`` under
``log2``), and that holder gives ``copies`` references away one after another, as the
dataflow controller shares a stripe with the CUs that use it. A copy needs the holder's
weight above 1, else the holder borrows. From the split rules:

- ``halve``: a power of two halves, holder keeps ``w - w // 2``: ``2^(bits-1)`` gives
  ``bits - 1`` copies before it is 1, so ``bits = copies + 1``;
- ``one``: each copy takes a unit: ``2^(bits-1) - 1`` copies, so ``bits = 1 + bitlen(copies)``;
- ``log2``: halves the exponent's power: ``2^bits - 1`` copies, so ``bits = bitlen(copies)``;

never narrower than the narrowest field the strategy accepts (2 bits, 1 for ``log2``).
"""

from __future__ import annotations

from allocators.errors import InputError
from allocators.weights import STRATEGIES

NARROWEST = {"halve": 2, "one": 2, "log2": 1}


def _check(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise InputError(f"unknown split strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def copies_without_borrow(bits: int, strategy: str) -> int:
    """The most successive copies a holder of a ``bits``-bit field's full weight makes unaided."""
    _check(strategy)
    if bits < NARROWEST[strategy]:
        raise InputError(f"weight field of {bits} bit(s) is too narrow for strategy {strategy!r}")
    if strategy == "halve":
        return bits - 1
    if strategy == "one":
        return (1 << (bits - 1)) - 1
    return (1 << bits) - 1


def min_bits(copies: int, strategy: str) -> int:
    """The narrowest field whose full weight gives ``copies`` copies without borrowing."""
    _check(strategy)
    if copies < 0:
        raise InputError(f"copies must be >= 0, got {copies}")
    need = {"halve": copies + 1, "one": 1 + copies.bit_length(), "log2": copies.bit_length()}[strategy]
    return max(NARROWEST[strategy], need)

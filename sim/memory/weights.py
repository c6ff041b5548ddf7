"""Weighted reference counting (partial-free): splitting a holder's weight.

The MU gives a new buffer's owner the largest weight ``2**bits - 1`` a reference can
carry and remembers it as the buffer's total. Copying a reference splits the holder's
weight between the holder and the copies with no message (Bevan 1987; Watson & Watson
1987); a holder returns its weight when it drops the reference, and the MU frees the
buffer when the weight it has collected equals the total. Conservation: the weights
held plus the weights in flight plus the weight collected always equal the total.

Split strategies: ``halve`` gives each copy half of what the holder has left
(Bevan's), ``even`` shares the weight equally between the holder and all copies made
at once (remainder to the holder). A holder whose weight cannot be split (every part
must be at least 1) borrows fresh weight for its copies from the MU (a weight request
and its acknowledgement; ``on_unsplittable = "borrow"``); the MU adds the grant to the
total, a register wider than a reference's weight field.

Stand-in until allocators/ ships its weighted references (issue 3).
"""

from __future__ import annotations

SPLITS = ("halve", "even")
UNSPLITTABLE = ("borrow",)


def max_weight(bits: int) -> int:
    return (1 << bits) - 1


def split(weight: int, copies: int, strategy: str) -> tuple[int, list[int]] | None:
    """(weight kept, weight of each copy), or None when ``weight`` cannot give every copy
    at least 1 and keep 1. Parts always sum to ``weight``."""
    if copies < 1:
        return weight, []
    if weight < copies + 1:
        return None
    if strategy == "halve":
        keep, gives = weight, []
        for _ in range(copies):
            if keep < 2:
                return None
            g = keep // 2
            gives.append(g)
            keep -= g
        return keep, gives
    if strategy == "even":
        share = weight // (copies + 1)
        return weight - share * copies, [share] * copies
    raise ValueError(f"unknown split strategy {strategy!r}; expected one of {SPLITS}")


def borrowed(copies: int, bits: int) -> list[int]:
    """Weights of the copies when the holder's weight cannot be split: the holder asks
    the MU (one weight request) for a full weight per copy and keeps its own, so no
    reference ever holds more than ``2**bits - 1``; the MU adds them to the total."""
    return [max_weight(bits)] * copies

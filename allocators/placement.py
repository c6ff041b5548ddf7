"""Where a buffer may start: alignment, allowed banks, and the lowest gap among busy ranges."""

from __future__ import annotations

from dataclasses import dataclass

from allocators.errors import InputError
from allocators.lifetimes import Buffer

UNBOUNDED = 1 << 62


def align_up(x: int, alignment: int) -> int:
    return -(-x // alignment) * alignment


@dataclass(frozen=True)
class Slot:
    """Placement rule of one buffer: size, alignment and the address windows it may occupy."""

    size: int
    alignment: int = 1
    windows: tuple[tuple[int, int], ...] = ((0, UNBOUNDED),)

    def lift(self, offset: int) -> int:
        """Lowest legal start >= offset (aligned, inside one window); UNBOUNDED if there is none."""
        for lo, hi in self.windows:
            if hi <= offset:
                continue
            start = align_up(max(offset, lo), self.alignment)
            if start + self.size <= hi:
                return start
        return UNBOUNDED

    @property
    def constrained(self) -> bool:
        return self.windows != ((0, UNBOUNDED),)


def slot_of(buffer: Buffer, bank_size: int | None) -> Slot:
    """The buffer's slot; allowed banks become merged windows [k * bank_size, (k+1) * bank_size)."""
    if buffer.banks is None:
        return Slot(buffer.size, buffer.alignment)
    if bank_size is None:
        raise InputError(f"buffer {buffer.id!r} names banks but the problem has no bank size")
    windows: list[list[int]] = []
    for k in sorted(buffer.banks):
        lo, hi = k * bank_size, (k + 1) * bank_size
        if windows and windows[-1][1] == lo:
            windows[-1][1] = hi
        else:
            windows.append([lo, hi])
    slot = Slot(buffer.size, buffer.alignment, tuple((lo, hi) for lo, hi in windows))
    if slot.lift(0) >= UNBOUNDED:
        raise InputError(f"buffer {buffer.id!r} ({buffer.size} B) fits in none of its allowed banks "
                         f"{sorted(buffer.banks)} of {bank_size} B")
    return slot


def lowest_fit(slot: Slot, busy: list[tuple[int, int]], floor: int = 0) -> int:
    """Lowest legal start >= floor whose range misses every busy [lo, hi) (busy sorted by lo)."""
    o = slot.lift(floor)
    for lo, hi in busy:
        if o >= UNBOUNDED or lo >= o + slot.size:
            break
        if hi > o:
            o = slot.lift(hi)
    return o


def gap_starts(slot: Slot, busy: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every (start, gap length) where the buffer fits between busy ranges, lowest first.

    The last entry is the first start above all busy ranges; its gap length is UNBOUNDED.
    """
    out: list[tuple[int, int]] = []
    reach = 0  # highest end among busy ranges seen so far
    for lo, hi in busy:
        if lo > reach:
            start = slot.lift(reach)
            if start + slot.size <= lo:
                out.append((start, lo - reach))
        reach = max(reach, hi)
    out.append((slot.lift(reach), UNBOUNDED))
    return out

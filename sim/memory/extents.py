"""A first-fit free list of byte extents in one MU's scratchpad (contiguous allocation).

Stand-in until allocators/ ships its free-list allocator (issue 3): same behaviour the
static-multi and realloc-copy policies need (first fit from the lowest address,
coalescing on free, an alignment), nothing more.
"""

from __future__ import annotations

import bisect


class Extents:
    def __init__(self, capacity: int, align: int = 64):
        self.capacity = capacity
        self.align = max(1, align)
        self.free_starts = [0]  # sorted starts of free extents
        self.free_sizes = {0: capacity}
        self.taken: dict[int, int] = {}  # start -> size

    def round(self, nbytes: int) -> int:
        a = self.align
        return max(a, -(-nbytes // a) * a)

    def allocate(self, nbytes: int) -> int | None:
        """Start of a new extent of ``round(nbytes)`` bytes at the lowest address that fits."""
        size = self.round(nbytes)
        for s in self.free_starts:
            have = self.free_sizes[s]
            if have >= size:
                i = bisect.bisect_left(self.free_starts, s)
                del self.free_starts[i]
                del self.free_sizes[s]
                if have > size:
                    bisect.insort(self.free_starts, s + size)
                    self.free_sizes[s + size] = have - size
                self.taken[s] = size
                return s
        return None

    def release(self, start: int) -> int:
        """Free the extent at ``start``; returns its size. Coalesces with free neighbours."""
        size = self.taken.pop(start)
        i = bisect.bisect_left(self.free_starts, start)
        s, n = start, size
        if i < len(self.free_starts) and self.free_starts[i] == start + size:  # merge right
            n += self.free_sizes.pop(self.free_starts[i])
            del self.free_starts[i]
        if i > 0:
            left = self.free_starts[i - 1]
            if left + self.free_sizes[left] == start:  # merge left
                s = left
                n += self.free_sizes[left]
                del self.free_starts[i - 1]
                del self.free_sizes[left]
        bisect.insort(self.free_starts, s)
        self.free_sizes[s] = n
        return size

    def free_bytes(self) -> int:
        return sum(self.free_sizes.values())

    def largest_free(self) -> int:
        return max(self.free_sizes.values(), default=0)

    def free_extents(self) -> list[tuple[int, int]]:
        return [(s, self.free_sizes[s]) for s in self.free_starts]

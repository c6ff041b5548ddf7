"""Free-list allocator over one address range (after tt-metal's bank allocator).

Free blocks are indexed twice: by address (dicts start -> end and end -> start, so a
free coalesces with both neighbours in O(1)) and by segregated size class (class k
holds sizes in [2^k, 2^(k+1)), each class kept sorted by address and by size). A
request looks only at its own class and at the lowest/highest block of each larger
non-empty class, never at every block.

Every block boundary is a multiple of ``alignment``: the range is aligned inward and
each request is padded up to the alignment (and to ``min_allocation``), so alignment
never splits a block. Bottom-up allocation carves the low end of the chosen block,
top-down the high end. Nothing is placed below ``floor``.
"""

from __future__ import annotations

import bisect
from bisect import bisect_left, insort
from dataclasses import dataclass

from allocators.errors import AllocatorError, InputError, OutOfMemoryError
from allocators.placement import align_up

_CLASSES = 64  # class k holds free blocks of size [2^k, 2^(k+1)); sizes are below 2^64
_NONE = 1 << 64  # "no block" in the per-class lowest-address table


@dataclass(frozen=True)
class Statistics:
    """tt-metal's allocator statistics for one range (one bank)."""

    total_allocatable: int
    allocated: int
    free: int
    largest_free_block: int
    largest_free_block_addrs: tuple[int, ...]


@dataclass(frozen=True)
class Block:
    address: int
    size: int
    allocated: bool


class FreeList:
    """Allocator over [base, base + size): first/best fit, bottom-up/top-down, coalescing free."""

    POLICIES = ("first_fit", "best_fit")

    def __init__(self, size: int, base: int = 0, alignment: int = 1, min_allocation: int = 0,
                 floor: int | None = None, policy: str = "first_fit"):
        if size <= 0 or base < 0 or alignment <= 0 or min_allocation < 0:
            raise InputError(f"free list needs size > 0, base >= 0, alignment > 0, min_allocation >= 0 "
                             f"(got size={size}, base={base}, alignment={alignment}, min_allocation={min_allocation})")
        if policy not in self.POLICIES:
            raise InputError(f"unknown policy {policy!r}; choose {' or '.join(self.POLICIES)}")
        self.alignment, self.min_allocation, self.policy = alignment, min_allocation, policy
        self.start = align_up(base, alignment)
        self.end = (base + size) // alignment * alignment
        if self.end <= self.start:
            raise InputError(f"range [{base}, {base + size}) holds no aligned block of {alignment} B")
        self._free: dict[int, int] = {}      # free block start -> end
        self._free_at_end: dict[int, int] = {}  # free block end -> start
        self._allocated: dict[int, int] = {}  # allocated block start -> padded size
        self._by_addr: list[list[int]] = [[] for _ in range(_CLASSES)]
        self._by_size: list[list[int]] = [[] for _ in range(_CLASSES)]  # best fit only
        self._sized = policy == "best_fit"
        # by-size key: size << shift | start, with every address below 2^shift
        self._shift = self.end.bit_length()
        self._mask = (1 << self._shift) - 1
        self._choose = self._best_fit if self._sized else self._first_fit
        self._classes = 0  # bit k set when class k holds a free block
        self._lowest = [_NONE] * _CLASSES  # per class: lowest free block start
        self._highest = [-1] * _CLASSES    # per class: highest free block start
        self._allocated_bytes = 0
        self.floor = self.start
        self._insert(self.start, self.end)
        if floor is not None:
            self.set_floor(floor)

    # ---------------------------------------------------------------- requests
    def padded(self, size: int) -> int:
        """Bytes a request of ``size`` really takes (minimum size, then alignment)."""
        if size <= 0:
            raise InputError(f"allocation size must be positive, got {size}")
        return align_up(max(size, self.min_allocation), self.alignment)

    def allocate(self, size: int, top_down: bool = False) -> int:
        """Address of a new block of at least ``size`` bytes; OutOfMemoryError if none fits."""
        if size <= 0:
            raise InputError(f"allocation size must be positive, got {size}")
        al = self.alignment
        need = -(-(size if size > self.min_allocation else self.min_allocation) // al) * al
        start = self._choose(need, need.bit_length() - 1, top_down)
        if start is None:
            stats = self.statistics()
            raise OutOfMemoryError(size, need, stats.free, stats.largest_free_block)
        end = self._free[start]
        if end - start == need:
            self._replace(start, end, None, None)
            at = start
        elif top_down:
            at = end - need
            self._replace(start, end, start, at)
        else:
            at = start
            self._replace(start, end, start + need, end)
        self._allocated[at] = need
        self._allocated_bytes += need
        return at

    def allocate_at(self, address: int, size: int) -> int:
        """Allocate exactly [address, address + padded size); error if that range is not all free."""
        need = self.padded(size)
        if address % self.alignment:
            raise AllocatorError(f"address {address} is not a multiple of the alignment {self.alignment}")
        holder = self._free_block_containing(address)
        if holder is None or self._free[holder] < address + need:
            raise AllocatorError(f"[{address}, {address + need}) is not free")
        end = self._free[holder]
        self._remove(holder, end)
        if holder < address:
            self._insert(holder, address)
        if address + need < end:
            self._insert(address + need, end)
        self._allocated[address] = need
        self._allocated_bytes += need
        return address

    def free(self, address: int) -> None:
        """Release the block at ``address`` and merge it with free neighbours."""
        try:
            size = self._allocated.pop(address)
        except KeyError:
            raise AllocatorError(f"free of {address}: no allocated block starts there") from None
        self._allocated_bytes -= size
        start, end = address, address + size
        right = self._free.get(end)
        left = self._free_at_end.get(start)
        if left is not None:
            if right is not None:
                self._replace(end, right, None, None)
                end = right
            self._replace(left, start, left, end)
        elif right is not None:
            self._replace(end, right, start, right)
        else:
            self._replace(None, None, start, end)

    def set_floor(self, floor: int) -> None:
        """Nothing may be placed below ``floor`` (aligned up); error if a live block is below it."""
        floor = min(max(align_up(floor, self.alignment), self.start), self.end)
        if floor > self.floor:
            end = self._free.get(self.floor)
            if end is None or end < floor:
                clash = min(a for a in self._allocated if a < floor)
                raise AllocatorError(
                    f"floor {floor} would lie above allocated block [{clash}, {clash + self._allocated[clash]})")
            self._remove(self.floor, end)
            if floor < end:
                self._insert(floor, end)
        elif floor < self.floor:
            end = self.floor
            right = self._free.get(end)
            if right is not None:
                self._remove(end, right)
                end = right
            self._insert(floor, end)
        self.floor = floor

    # ---------------------------------------------------------------- queries
    def statistics(self) -> Statistics:
        total = self.end - self.floor
        largest, addrs = 0, ()  # type: tuple[int, tuple[int, ...]]
        if self._classes:  # the largest block is in the highest non-empty class
            top = self._by_addr[self._classes.bit_length() - 1]
            largest = max(self._free[a] - a for a in top)
            addrs = tuple(a for a in top if self._free[a] - a == largest)
        return Statistics(total, self._allocated_bytes, total - self._allocated_bytes, largest, addrs)

    def blocks(self) -> list[Block]:
        """Every block from the floor up, in address order (for the detailed memory report)."""
        out = [Block(a, e - a, False) for a, e in self._free.items()]
        out += [Block(a, s, True) for a, s in self._allocated.items()]
        return sorted(out, key=lambda b: b.address)

    def allocated(self) -> dict[int, int]:
        return dict(self._allocated)

    def size_of(self, address: int) -> int:
        return self._allocated[address]

    # ---------------------------------------------------------------- internals
    def _first_fit(self, need: int, k: int, top_down: bool) -> int | None:
        """Lowest (or highest, top-down) address among blocks that can hold ``need``."""
        # every block of a larger class fits: the extreme address over those classes is a
        # candidate; only the request's own class holds blocks too small for it, so only it is walked
        free, own = self._free, self._by_addr[k]
        top = self._classes.bit_length()  # classes at or above this one are empty
        if top_down:
            best = max(self._highest[k + 1:top]) if k + 1 < top else -1
            for start in reversed(own):
                if start <= best:
                    break
                if free[start] - start >= need:
                    return start
            return best if best >= 0 else None
        best = min(self._lowest[k + 1:top]) if k + 1 < top else _NONE
        for start in own:
            if start >= best:
                break
            if free[start] - start >= need:
                return start
        return best if best != _NONE else None

    def _best_fit(self, need: int, k: int, top_down: bool) -> int | None:
        """Smallest block that holds ``need``; among equals the lowest (highest, top-down) address."""
        keys = self._by_size[k]
        shift = self._shift
        i = bisect.bisect_left(keys, need << shift)
        if i == len(keys):
            higher = self._classes >> (k + 1)
            if not higher:
                return None
            keys = self._by_size[k + (higher & -higher).bit_length()]
            i = 0
        if not top_down:
            return keys[i] & self._mask
        size = keys[i] >> shift
        return keys[bisect.bisect_left(keys, (size + 1) << shift) - 1] & self._mask

    def _insert(self, start: int, end: int) -> None:
        self._replace(None, None, start, end)

    def _remove(self, start: int, end: int) -> None:
        self._replace(start, end, None, None)

    def _replace(self, start, end, new_start, new_end) -> None:
        """Replace free block [start, end) by [new_start, new_end); None on either side: only add/drop.

        A block that grows or shrinks at one end and stays in its size class keeps its place
        in the class's address list (no other free block lies between the old and the new
        start), so the entry is rewritten in place instead of being removed and re-inserted.
        """
        free, at_end = self._free, self._free_at_end
        k = (end - start).bit_length() - 1 if start is not None else -1
        if new_start is not None and k == (new_end - new_start).bit_length() - 1:
            if self._sized:
                keys = self._by_size[k]
                del keys[bisect_left(keys, (end - start) << self._shift | start)]
                insort(keys, (new_end - new_start) << self._shift | new_start)
            if new_start != start:
                del free[start]
                addrs = self._by_addr[k]
                i = bisect_left(addrs, start)
                addrs[i] = new_start
                if i == 0:
                    self._lowest[k] = new_start
                if i == len(addrs) - 1:
                    self._highest[k] = new_start
            if new_end != end:
                del at_end[end]
            free[new_start] = new_end
            at_end[new_end] = new_start
            return
        if start is not None:
            del free[start]
            del at_end[end]
            addrs = self._by_addr[k]
            i = bisect_left(addrs, start)
            del addrs[i]
            if self._sized:
                keys = self._by_size[k]
                del keys[bisect_left(keys, (end - start) << self._shift | start)]
            if not addrs:
                self._lowest[k], self._highest[k] = _NONE, -1
                self._classes &= ~(1 << k)
            elif i == 0:
                self._lowest[k] = addrs[0]
            elif i == len(addrs):
                self._highest[k] = addrs[-1]
        if new_start is not None:
            free[new_start] = new_end
            at_end[new_end] = new_start
            k = (new_end - new_start).bit_length() - 1
            addrs = self._by_addr[k]
            i = bisect_left(addrs, new_start)
            addrs.insert(i, new_start)
            if i == 0:
                self._lowest[k] = new_start
                self._classes |= 1 << k
            if i == len(addrs) - 1:
                self._highest[k] = new_start
            if self._sized:
                insort(self._by_size[k], (new_end - new_start) << self._shift | new_start)

    def _free_block_containing(self, address: int) -> int | None:
        """Start of the free block holding ``address``: one bisect per non-empty class."""
        classes, k = self._classes, 0
        while classes:
            low = classes & -classes
            k = low.bit_length() - 1
            addrs = self._by_addr[k]
            i = bisect.bisect_right(addrs, address) - 1
            if i >= 0 and self._free[addrs[i]] > address:
                return addrs[i]
            classes ^= low
        return None

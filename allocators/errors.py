"""Errors raised by the allocators: bad input, and running out of memory."""

from __future__ import annotations


class AllocatorError(Exception):
    """Base class of every error raised by ``allocators``."""


class InputError(AllocatorError, ValueError):
    """A malformed problem or file; ``line`` is the 1-based file line when known."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line


class OutOfMemoryError(AllocatorError, MemoryError):
    """A request that does not fit; says whether fragmentation (not total space) is the cause."""

    def __init__(self, request: int, per_bank: int, free: int, largest_free: int,
                 banks: int = 1, what: str = "allocation"):
        self.request, self.per_bank, self.free = request, per_bank, free
        self.largest_free, self.banks = largest_free, banks
        cause = ("fragmentation: enough free bytes in total, no contiguous block large enough"
                 if free >= per_bank else "not enough free memory")
        super().__init__(
            f"out of memory: {what} of {request} B needs {per_bank} B per bank "
            f"({banks} bank{'s' if banks != 1 else ''}); free {free} B per bank, "
            f"largest free block {largest_free} B ({cause})")

    @property
    def fragmented(self) -> bool:
        return self.free >= self.per_bank


class NoPlacementError(AllocatorError):
    """A heuristic planner found no legal address for a buffer (its allowed banks are all taken)."""

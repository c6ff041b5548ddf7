"""Buffers with lifetimes: the input of the static (lifetime-aware) planners.

A buffer is live in the half-open time interval [start, end). With a ``period`` (a
software-pipelined loop body of that many steps) times are taken modulo the period, so
a buffer whose end passes the period wraps around: [start, period) and [0, end - period).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from allocators.errors import InputError

KINDS = ("activation", "weight", "scratch")


@dataclass(frozen=True)
class Buffer:
    """One buffer to place: lifetime, size and placement constraints."""

    id: str
    start: int
    end: int
    size: int
    alignment: int = 1
    kind: str = "activation"
    # allowed banks (indices of bank_size-byte banks); None means any bank
    banks: frozenset[int] | None = None
    # time steps at which a DMA engine reads or writes the buffer; compute uses the rest
    dma_steps: frozenset[int] = field(default_factory=frozenset)

    @property
    def lifetime(self) -> int:
        return self.end - self.start

    @property
    def area(self) -> int:
        """Bytes x time steps: the LayerGroup/MiniMalloc ordering key."""
        return self.size * self.lifetime


@dataclass(frozen=True)
class Problem:
    """A dynamic-storage-allocation instance: place every buffer so no two live ones overlap."""

    buffers: tuple[Buffer, ...]
    period: int | None = None
    bank_size: int | None = None
    # LayerGroup: the group is sliced (looped), so weights stay resident for the whole loop
    sliced: bool = False

    def __post_init__(self):
        object.__setattr__(self, "buffers", tuple(self.buffers))
        check_problem(self)

    def __len__(self) -> int:
        return len(self.buffers)


def check_problem(problem: Problem) -> None:
    """Raise InputError naming the first buffer whose fields are impossible."""
    if problem.period is not None and problem.period <= 0:
        raise InputError(f"period must be positive, got {problem.period}")
    if problem.bank_size is not None and problem.bank_size <= 0:
        raise InputError(f"bank_size must be positive, got {problem.bank_size}")
    seen: set[str] = set()
    for b in problem.buffers:
        where = f"buffer {b.id!r}"
        if b.id in seen:
            raise InputError(f"{where}: duplicate id")
        seen.add(b.id)
        if b.size <= 0:
            raise InputError(f"{where}: size must be positive, got {b.size}")
        if b.end <= b.start:
            raise InputError(f"{where}: end ({b.end}) must be greater than start ({b.start})")
        if b.alignment <= 0:
            raise InputError(f"{where}: alignment must be positive, got {b.alignment}")
        if b.kind not in KINDS:
            raise InputError(f"{where}: kind must be one of {', '.join(KINDS)}, got {b.kind!r}")
        if problem.period is not None:
            if not 0 <= b.start < problem.period:
                raise InputError(f"{where}: start {b.start} outside [0, period={problem.period})")
            if b.lifetime > problem.period:
                raise InputError(f"{where}: lifetime {b.lifetime} longer than the period {problem.period}")
        if b.banks is not None:
            if problem.bank_size is None:
                raise InputError(f"{where}: bank constraint given but the problem has no bank_size")
            if not b.banks:
                raise InputError(f"{where}: empty set of allowed banks")


def segments(buffer: Buffer, period: int | None) -> list[tuple[int, int]]:
    """The buffer's live time as one or two half-open intervals (two when it wraps)."""
    if period is None or buffer.end <= period:
        return [(buffer.start, buffer.end)]
    return [(buffer.start, period), (0, buffer.end - period)]


def overlap_in_time(a: Buffer, b: Buffer, period: int | None) -> bool:
    """True when the two buffers are live at a common time step."""
    return any(s1 < e2 and s2 < e1 for s1, e1 in segments(a, period) for s2, e2 in segments(b, period))


def with_resident_weights(problem: Problem) -> Problem:
    """Weights live for the whole loop when the group is sliced (LayerGroup's hold-on-coefficient rule)."""
    if not problem.sliced:
        return problem
    if problem.period is not None:
        lo, hi = 0, problem.period
    else:
        lo = min((b.start for b in problem.buffers), default=0)
        hi = max((b.end for b in problem.buffers), default=1)
    buffers = tuple(replace(b, start=lo, end=hi) if b.kind == "weight" else b for b in problem.buffers)
    return replace(problem, buffers=buffers)

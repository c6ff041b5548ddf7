"""Allocation traces: a CSV of alloc/free/circular-buffer steps replayed on lockstep banks.

Columns ``op,memory,id,size[,top_down]``, one step a row:

- ``alloc``: ``size`` bytes per bank in ``memory`` under the name ``id``;
- ``free``: release buffer ``id``;
- ``cb``: grow ``memory``'s circular-buffer region by ``size`` bytes;
- ``clear_cbs``: empty that region.

``top_down`` (true/false, optional) overrides the memory's default direction. Replaying
stops at the first step that fails (out of memory, circular buffers reaching a buffer),
so the reports show the state that made it fail.
"""

from __future__ import annotations

from dataclasses import dataclass

from allocators.banks import BankAllocator
from allocators.csv_rows import csv_rows
from allocators.errors import AllocatorError, InputError

OPS = ("alloc", "free", "cb", "clear_cbs")


@dataclass(frozen=True)
class Step:
    line: int
    op: str
    memory: str
    id: str
    size: int
    top_down: bool | None


@dataclass(frozen=True)
class Replay:
    """How far a trace got: steps done, and the failing step with its error (None if all ran)."""

    done: int
    failed: Step | None = None
    error: str = ""


def parse_trace(text: str, memories: set[str]) -> list[Step]:
    """Steps of a trace; InputError naming the line for anything malformed."""
    _, rows = csv_rows(text, ("op", "memory", "id", "size"), ("top_down",))
    steps, live = [], {}  # live buffer id -> its memory
    for line, field in rows:
        op, memory, ident = field["op"].lower(), field["memory"], field["id"]
        if op not in OPS:
            raise InputError(f"unknown op {op!r}; expected one of {', '.join(OPS)}", line=line)
        if memory not in memories:
            raise InputError(f"unknown memory {memory!r}; declared: {', '.join(sorted(memories))}", line=line)
        size = 0
        if op in ("alloc", "cb"):
            try:
                size = int(field["size"])
            except ValueError:
                raise InputError(f"size: expected an integer, got {field['size']!r}", line=line) from None
            if size <= 0:
                raise InputError(f"size must be positive, got {size}", line=line)
        if op == "alloc":
            if ident in live:
                raise InputError(f"buffer {ident!r} is already allocated", line=line)
            live[ident] = memory
        elif op == "free":
            if ident not in live:
                raise InputError(f"free of {ident!r}, which is not allocated", line=line)
            if live[ident] != memory:
                raise InputError(f"buffer {ident!r} was allocated in {live[ident]}, not {memory}", line=line)
            del live[ident]
        top = field.get("top_down", "").lower()
        if top not in ("", "true", "false", "1", "0"):
            raise InputError(f"top_down: expected true or false, got {top!r}", line=line)
        steps.append(Step(line, op, memory, ident, size, None if top == "" else top in ("true", "1")))
    return steps


def replay(steps: list[Step], memories: dict[str, BankAllocator]) -> Replay:
    """Apply the steps in order; stop at the first that fails."""
    where: dict[str, int] = {}
    for done, step in enumerate(steps):
        mem = memories[step.memory]
        try:
            if step.op == "alloc":
                where[step.id] = mem.allocate(step.size, step.top_down)
            elif step.op == "free":
                mem.free(where.pop(step.id))
            elif step.op == "cb":
                mem.allocate_circular_buffer(step.size)
            else:
                mem.clear_circular_buffers()
        except AllocatorError as err:
            return Replay(done, step, str(err))
    return Replay(len(steps))

"""The MiniMalloc CSV format: ``id,lower,upper,size[,alignment,offset]``, one buffer a row.

A buffer is live in [lower, upper) and needs ``size`` bytes; ``alignment`` defaults to 1;
``offset``, when present, is a placement (a solution) to check or to start from.
"""

from __future__ import annotations

import csv
import io

from allocators.csv_rows import csv_rows
from allocators.errors import InputError
from allocators.lifetimes import Buffer, Problem

REQUIRED = ("id", "lower", "upper", "size")
OPTIONAL = ("alignment", "offset")


def parse_csv(text: str) -> tuple[Problem, dict[str, int] | None]:
    """Problem (and offsets, if the file has an offset column) from CSV text; errors name the line."""
    columns, rows = csv_rows(text, REQUIRED, OPTIONAL)
    buffers: list[Buffer] = []
    offsets: dict[str, int] = {}
    seen: dict[str, int] = {}
    for line, row in rows:
        ident = row["id"]
        if not ident:
            raise InputError("empty id", line=line)
        if ident in seen:
            raise InputError(f"duplicate id {ident!r} (first on line {seen[ident]})", line=line)
        seen[ident] = line
        lower, upper, size = (_int(row[c], c, line) for c in ("lower", "upper", "size"))
        alignment = _int(row["alignment"], "alignment", line) if "alignment" in columns else 1
        if size <= 0:
            raise InputError(f"size must be positive, got {size} (buffer {ident!r})", line=line)
        if upper <= lower:
            raise InputError(f"upper ({upper}) must be greater than lower ({lower}) (buffer {ident!r})", line=line)
        if alignment <= 0:
            raise InputError(f"alignment must be positive, got {alignment} (buffer {ident!r})", line=line)
        if "offset" in columns:
            offset = _int(row["offset"], "offset", line)
            if offset < 0:
                raise InputError(f"offset must not be negative, got {offset} (buffer {ident!r})", line=line)
            offsets[ident] = offset
        buffers.append(Buffer(ident, lower, upper, size, alignment))
    return Problem(tuple(buffers)), (offsets if "offset" in columns else None)


def read_csv(path) -> tuple[Problem, dict[str, int] | None]:
    """Read a MiniMalloc CSV file; InputError (with the line) if it is malformed."""
    with open(path, newline="") as f:
        return parse_csv(f.read())


def format_csv(problem: Problem, offsets: dict[str, int] | None = None) -> str:
    """CSV text of the problem, with an offset column when offsets are given."""
    with_align = any(b.alignment != 1 for b in problem.buffers)
    header = list(REQUIRED) + (["alignment"] if with_align else []) + (["offset"] if offsets is not None else [])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for b in problem.buffers:
        row = [b.id, b.start, b.end, b.size] + ([b.alignment] if with_align else [])
        writer.writerow(row + ([offsets[b.id]] if offsets is not None else []))
    return out.getvalue()


def _int(cell: str, column: str, line: int) -> int:
    text = cell.strip()
    try:
        return int(text)
    except ValueError:
        raise InputError(f"column {column!r}: expected an integer, got {text!r}", line=line) from None

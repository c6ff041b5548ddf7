"""Rows of a small CSV file as (line number, {column: text}), with header errors on line 1."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator

from allocators.errors import InputError


def csv_rows(text: str | Iterable[str], required: tuple[str, ...], optional: tuple[str, ...] = (),
             others: bool = False) -> tuple[set[str], Iterator[tuple[int, dict[str, str]]]]:
    """The file's columns (lower case) and an iterator over its non-blank rows; InputError names
    the bad line. Columns beyond ``required`` and ``optional`` are an error unless ``others``.
    ``text`` may be an open file (read line by line as the rows are taken)."""
    reader = csv.reader(io.StringIO(text) if isinstance(text, str) else text)
    header = next(reader, None)
    expected = ",".join(required) + "".join(f"[,{c}]" for c in optional)
    if header is None or not any(h.strip() for h in header):
        raise InputError(f"empty file: expected a header {expected!r}", line=1)
    names = [h.strip().lower() for h in header]
    missing = [c for c in required if c not in names]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}; expected {expected}", line=1)
    unknown = [c for c in names if c not in required + optional]
    if unknown and not others:
        raise InputError(f"unknown column(s) {', '.join(unknown)}; expected {expected}", line=1)

    def rows() -> Iterator[tuple[int, dict[str, str]]]:
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(names):
                raise InputError(f"expected {len(names)} fields, found {len(row)}", line=reader.line_num)
            yield reader.line_num, {name: cell.strip() for name, cell in zip(names, row)}

    return set(names), rows()

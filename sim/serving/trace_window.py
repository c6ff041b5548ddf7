"""Read one window of a request trace, not the whole file: the 2024 Azure traces hold 16.8 and
27.3 million requests, and a run takes a few hundred of them.

The window is [first + start, first + start + duration) seconds from the file's first arrival
(duration 0: to the end), at most ``limit`` requests of it (0: all). The public traces are in
time order, and the readers rely on it: a CSV or JSON-lines file (gzipped or not) is read line
by line and closed at the first request past the window (or when the limit is reached); a
Parquet file is read row group by row group, skipping the groups that end before the window by
their statistics (or, for a text timestamp, by their first and last values) and stopping at
the first group that starts past it, and only the columns used are read. A request earlier
than the one before it is an error naming its line or row (sort the file once); rows outside
the part read are not checked. Memory is bounded by the window and one block of the file,
whatever the file's size (``benchmarks/trace_window.py``).

Which format a file is (trace_formats.py) is told by its header or first JSON line, or
named (``trace_format``). A BurstGPT window skips the rows it marks failed (no response
tokens), counting them, and may keep one model's rows (``model``).
"""

from __future__ import annotations

import csv
import gzip
import json
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

from allocators.csv_rows import csv_rows
from allocators.errors import InputError
from sim.serving.prefix_blocks import PrefixInterner
from sim.serving.trace import RequestRows, TraceError, TraceWindow, missing, tokens
from sim.serving.trace_formats import FORMATS, TraceFormat, listing, resolve

BATCH_ROWS = 1 << 16  # Parquet rows converted at a time
PARQUET = (".parquet", ".pq")


@dataclass
class _Cut:
    """The window being cut from a file read in order: where each arrival falls, and the
    requests taken (one read's mutable tally)."""

    start_ns: int
    duration_ns: int
    limit: int
    model: str = ""
    fmt: TraceFormat = FORMATS["azure"]
    lo: int | None = None  # the window's bounds, known from the file's first arrival
    hi: int | None = None
    last: int | None = None  # the latest arrival seen (the file must not go back in time)
    before: int = 0
    failed: int = 0
    taken: list[tuple[int, int, int]] = field(default_factory=list)
    prefix: PrefixInterner | None = None

    def first(self, t: int) -> None:
        if self.lo is None:
            self.lo = t + self.start_ns
            self.hi = self.lo + self.duration_ns if self.duration_ns > 0 else None

    def place(self, t: int, text: object) -> int:
        """-1: before the window (counted), 0: in it, 1: past it (stop reading)."""
        if self.last is not None and t < self.last:
            raise ValueError(f"{self.fmt.time} {text!r} is earlier than the request before it: the trace must be in "
                             f"time order (sort it by {self.fmt.time} once)")
        self.last = t
        self.first(t)
        assert self.lo is not None
        if t < self.lo:
            self.before += 1
            return -1
        return 1 if self.hi is not None and t >= self.hi else 0

    def row(self, get: Callable[[str], object], t: int | None = None) -> bool:
        """One row of the file (``get``: its value of a column; ``t``: its arrival, if already
        known); True when reading can stop."""
        f = self.fmt
        if self.model and str(get(f.model)).strip() != self.model:
            return False  # another model's request: not part of this trace
        raw = get(f.time)
        arrival = f.arrival_ns(raw) if t is None else t
        where = self.place(arrival, raw)
        if where:
            return where > 0
        if f.zero_output_fails and _zero(get(f.output)):
            self.failed += 1  # BurstGPT: "failure that Response tokens are 0s"
            return False
        self.taken.append((arrival, tokens(get(f.prompt), f.prompt), tokens(get(f.output), f.output)))
        if self.prefix is not None:
            self.prefix.add(get(f.hash_ids))
        return bool(self.limit) and len(self.taken) >= self.limit

    def window(self) -> TraceWindow:
        f = self.fmt
        blocks = self.prefix.blocks(f.block_tokens) if self.prefix is not None else None
        t, prompt, output = (tuple(r[k] for r in self.taken) for k in range(3))
        rows = RequestRows(t, prompt, output, blocks)
        return TraceWindow(rows, self.before, f.name, self.failed, f.ignored)


def _zero(value) -> bool:
    try:
        return Decimal(str(value).strip()) == 0
    except ArithmeticError:
        return False  # not a number: tokens() names it


def _text(path: Path):
    """The file as text lines (gunzipped if its name ends in .gz)."""
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    return open(path, newline="", encoding="utf-8")


def _layout(path: Path) -> str:
    """parquet, jsonl or csv: Parquet by its name, JSON lines by a first character "{" (or "[")."""
    if path.suffix.lower() in PARQUET:
        return "parquet"
    try:
        with _text(path) as f:
            for line in f:
                if line.strip():
                    return "jsonl" if line.lstrip()[:1] in ("{", "[") else "csv"
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise TraceError(f"{path}: not a text file ({exc})") from None
    return "csv"


def _named(cut: _Cut, asked: str, names: set[str], layout: str) -> None:
    """Set the cut's format from a header (lower case); ValueError names what is wrong."""
    cut.fmt = resolve(names, layout, asked)
    if cut.model and not cut.fmt.model:
        raise ValueError(f"trace_model {cut.model!r}: the {cut.fmt.name} format names no model (burstgpt does)")
    if cut.fmt.model and cut.model and cut.fmt.model.lower() not in names:
        raise ValueError(f"trace_model {cut.model!r}: the file has no {cut.fmt.model} column")
    if cut.fmt.hash_ids:
        cut.prefix = PrefixInterner()


def _csv(path: Path, cut: _Cut, asked: str) -> None:
    try:
        with _text(path) as f:
            try:
                names, rows = csv_rows(f, (), others=True)
            except InputError:
                raise InputError(f"empty file: expected a header; formats: {listing()}", line=1) from None
            try:
                _named(cut, asked, names, "csv")
            except ValueError as exc:
                raise InputError(str(exc), line=1) from None
            for line, row in rows:
                try:
                    if cut.row(partial(_cell, row)):
                        return
                except ValueError as exc:
                    raise InputError(str(exc), line=line) from None
    except InputError as exc:
        raise TraceError(f"{path}: {exc}") from None
    except (UnicodeDecodeError, csv.Error, OSError, EOFError) as exc:
        raise TraceError(f"{path}: not a CSV text file ({exc})") from None


def _cell(row: dict[str, str], column: str) -> str:
    return row[column.lower()]


def _records(lines) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank JSON line; numbers with a fraction exact (Decimal)."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line, parse_float=Decimal)
        except json.JSONDecodeError as exc:
            raise InputError(f"column {exc.colno}: not JSON ({exc.msg})", line=n) from None
        if not isinstance(rec, dict):
            raise InputError("not a JSON object", line=n)
        yield n, rec


def _jsonl(path: Path, cut: _Cut, asked: str) -> None:
    def get(k):
        if k not in rec:
            raise ValueError(f"no key {k!r} ({cut.fmt.name}: {cut.fmt.header})")
        return rec[k]

    named = False
    try:
        with _text(path) as f:
            for line, rec in _records(f):
                try:
                    if not named:  # the first line tells the format
                        _named(cut, asked, {k.lower() for k in rec}, "jsonl")
                        named = True
                    if cut.fmt.hash_ids and cut.fmt.hash_ids not in rec:
                        rec[cut.fmt.hash_ids] = None  # no blocks for this request
                    if cut.row(get):
                        return
                except ValueError as exc:
                    raise InputError(str(exc), line=line) from None
    except InputError as exc:
        raise TraceError(f"{path}: {exc}") from None
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise TraceError(f"{path}: not a JSON-lines text file ({exc})") from None


def _stamps(col) -> list:
    """A timestamp column as Python values: ns (a timestamp type) or text (a number, a date)."""
    import pyarrow as pa

    if pa.types.is_timestamp(col.type):
        return col.cast(pa.timestamp("ns")).cast(pa.int64()).to_pylist()
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        return col.cast(pa.string()).to_pylist()  # read exactly as text, in the format's unit
    return col.to_pylist()


def _ns(value, f: TraceFormat) -> int:
    if value is None:
        raise ValueError("empty value")
    return value if isinstance(value, int) else f.arrival_ns(value)


def _group_bounds(pf, g: int, name: str, f: TraceFormat) -> tuple[int, int] | None:
    """Earliest and latest arrival of row group ``g``: its statistics (a timestamp or number
    column), else its first and last values (text, in time order); None if unknown."""
    import pyarrow as pa

    typ = pf.schema_arrow.field(name).type
    col = pf.metadata.row_group(g).column(pf.schema_arrow.get_field_index(name))
    st = col.statistics
    ordered = pa.types.is_timestamp(typ) or pa.types.is_integer(typ) or pa.types.is_floating(typ)
    try:
        if ordered and st is not None and st.has_min_max and col.path_in_schema == name:
            lo, hi = _stamps(pa.array([st.min_raw, st.max_raw]).cast(typ))
            return _ns(lo, f), _ns(hi, f)
        values = _stamps(pf.read_row_group(g, columns=[name]).column(0))
        return (_ns(values[0], f), _ns(values[-1], f)) if values else None
    except (pa.ArrowException, TypeError, ValueError):
        return None  # no usable bounds: the group is read


def _parquet(path: Path, cut: _Cut, asked: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None
    names = {n.lower(): n for n in pf.schema_arrow.names}
    try:
        _named(cut, asked, set(names), "parquet")
    except ValueError as exc:
        raise TraceError(f"{path}: {exc}") from None
    f = cut.fmt
    used = [f.time, f.prompt, f.output] + [c for c in (f.hash_ids, f.model) if c and c.lower() in names]
    cols = [names[c.lower()] for c in used]
    row = 0  # rows of the file before the current group
    try:
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            bounds = None if cut.model else _group_bounds(pf, g, cols[0], f)  # a filter: every row's model counts
            if bounds is not None:
                if cut.last is not None and bounds[0] < cut.last:
                    raise TraceError(f"{path}: row group {g} (rows {row + 1}-{row + n}) starts before the rows "
                                     f"above it end: the trace must be in time order (sort it by {f.time} once)")
                cut.first(bounds[0])
                assert cut.lo is not None
                if bounds[1] < cut.lo:  # wholly before the window: counted, not read
                    cut.before, cut.last, row = cut.before + n, bounds[1], row + n
                    continue
                if cut.hi is not None and bounds[0] >= cut.hi:
                    return
            for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[g], columns=cols):
                values = {u: (_stamps(batch.column(i)) if i == 0 else batch.column(i).to_pylist())
                          for i, u in enumerate(used)}
                for i, stamp in enumerate(values[f.time]):
                    row += 1
                    try:
                        def get(k, i=i, values=values):
                            v = values[k][i] if k in values else None
                            if v is None and k != f.hash_ids:
                                raise ValueError("empty value")
                            return v

                        if cut.row(get, _ns(stamp, f)):
                            return
                    except ValueError as exc:
                        raise TraceError(f"{path}: row {row}: {exc}") from None
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None


def read_window(path: str | Path, start: float = 0.0, duration: float = 0.0, limit: int = 0,
                trace_format: str = "auto", model: str = "") -> TraceWindow:
    """The requests of the window [first + start, first + start + duration) seconds of a trace
    file (duration 0: to the end), at most ``limit`` of them (0: all), in file order.
    ``trace_format``: a name of request_formats.FORMATS, or "auto" (told by the file's columns);
    ``model``: only the rows of this model (BurstGPT's ``Model``)."""
    p = Path(path)
    if not p.is_file():
        raise missing("trace file", p)
    cut = _Cut(int(round(start * 1e9)), int(round(duration * 1e9)), limit, model)
    layout = _layout(p)
    {"parquet": _parquet, "jsonl": _jsonl, "csv": _csv}[layout](p, cut, trace_format)
    of = f" of Model {model!r}" if model else ""
    if cut.lo is None:
        raise TraceError(f"{p}: no requests{of}")
    if not cut.taken:
        failed = f" ({cut.failed} failed, skipped)" if cut.failed else ""
        raise TraceError(f"the window ({start:g} s after the first arrival, {duration:g} s long) holds no "
                         f"request{of}{failed}")
    return cut.window()


def read_requests(path: str | Path, trace_format: str = "auto") -> RequestRows:
    """Every request of a trace file, in time order (the whole file: for small files and tests)."""
    return read_window(path, trace_format=trace_format).rows

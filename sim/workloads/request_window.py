"""Read one window of a request trace, not the whole file: the 2024 Azure traces hold 16.8 and
27.3 million requests, and a run takes a few hundred of them.

The window is [first + start, first + start + duration) seconds from the file's first arrival
(duration 0: to the end), at most ``limit`` requests of it (0: all). The public traces are in
time order, and the readers rely on it: a CSV is read line by line and closed at the first
request past the window (or when the limit is reached); a Parquet file is read row group by
row group, skipping the groups that end before the window by their statistics (or, for a text
``TIMESTAMP``, by their first and last values) and stopping at the first group that starts
past it, and only the three columns are read. A request earlier than the one before it is an
error naming its line or row (sort the file once); rows outside the part read are not checked.
Memory is bounded by the window and one block of the file, whatever the file's size
(``benchmarks/trace_window.py``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from allocators.csv_rows import csv_rows
from allocators.errors import InputError
from sim.workloads.request_trace import COLUMNS, RequestRows, TraceError, TraceWindow, missing, parse_timestamp, tokens

BATCH_ROWS = 1 << 16  # Parquet rows converted at a time


@dataclass
class _Cut:
    """The window being cut from a file read in order: where each arrival falls, and the
    requests taken (one read's mutable tally)."""

    start_ns: int
    duration_ns: int
    limit: int
    lo: int | None = None  # the window's bounds, known from the file's first arrival
    hi: int | None = None
    last: int | None = None  # the latest arrival seen (the file must not go back in time)
    before: int = 0
    taken: list[tuple[int, int, int]] = field(default_factory=list)

    def first(self, t: int) -> None:
        if self.lo is None:
            self.lo = t + self.start_ns
            self.hi = self.lo + self.duration_ns if self.duration_ns > 0 else None

    def place(self, t: int, text: object) -> int:
        """-1: before the window (counted), 0: in it, 1: past it (stop reading)."""
        if self.last is not None and t < self.last:
            raise ValueError(f"TIMESTAMP {text!r} is earlier than the request before it: the trace must be in "
                             "time order (sort it by TIMESTAMP once)")
        self.last = t
        self.first(t)
        assert self.lo is not None
        if t < self.lo:
            self.before += 1
            return -1
        return 1 if self.hi is not None and t >= self.hi else 0

    def take(self, t: int, prompt, output) -> bool:
        """Keep a request of the window; True when the limit is reached."""
        self.taken.append((t, tokens(prompt, COLUMNS[1]), tokens(output, COLUMNS[2])))
        return bool(self.limit) and len(self.taken) >= self.limit


def _csv(path: Path, cut: _Cut) -> None:
    keys = tuple(c.lower() for c in COLUMNS)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            _, rows = csv_rows(f, keys, others=True)
            for line, row in rows:
                try:
                    text = row[keys[0]]
                    t = parse_timestamp(text)
                    where = cut.place(t, text)
                    if where > 0 or (where == 0 and cut.take(t, row[keys[1]], row[keys[2]])):
                        return
                except ValueError as exc:
                    raise InputError(str(exc), line=line) from None
    except InputError as exc:
        raise TraceError(f"{path}: {exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{path}: not a CSV text file ({exc})") from None


def _stamps(col) -> list:
    """A TIMESTAMP column as Python values: ns (a timestamp type) or text (seconds, Azure text)."""
    import pyarrow as pa

    if pa.types.is_timestamp(col.type):
        return col.cast(pa.timestamp("ns")).cast(pa.int64()).to_pylist()
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        return col.cast(pa.string()).to_pylist()  # seconds, read exactly as text
    return col.to_pylist()


def _ns(value) -> int:
    if value is None:
        raise ValueError("empty value")
    return value if isinstance(value, int) else parse_timestamp(value)


def _group_bounds(pf, g: int, name: str) -> tuple[int, int] | None:
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
            return _ns(lo), _ns(hi)
        values = _stamps(pf.read_row_group(g, columns=[name]).column(0))
        return (_ns(values[0]), _ns(values[-1])) if values else None
    except (pa.ArrowException, TypeError, ValueError):
        return None  # no usable bounds: the group is read


def _parquet(path: Path, cut: _Cut) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None
    names = {n.lower(): n for n in pf.schema_arrow.names}
    missing = [c for c in COLUMNS if c.lower() not in names]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
    cols = [names[c.lower()] for c in COLUMNS]
    row = 0  # rows of the file before the current group
    try:
        for g in range(pf.metadata.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            bounds = _group_bounds(pf, g, cols[0])
            if bounds is not None:
                if cut.last is not None and bounds[0] < cut.last:
                    raise TraceError(f"{path}: row group {g} (rows {row + 1}-{row + n}) starts before the rows "
                                     "above it end: the trace must be in time order (sort it by TIMESTAMP once)")
                cut.first(bounds[0])
                assert cut.lo is not None
                if bounds[1] < cut.lo:  # wholly before the window: counted, not read
                    cut.before, cut.last, row = cut.before + n, bounds[1], row + n
                    continue
                if cut.hi is not None and bounds[0] >= cut.hi:
                    return
            for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=[g], columns=cols):
                stamps = _stamps(batch.column(0))
                prompt, output = batch.column(1).to_pylist(), batch.column(2).to_pylist()
                for i, text in enumerate(stamps):
                    row += 1
                    try:
                        t = _ns(text)
                        where = cut.place(t, text)
                        if where == 0 and (prompt[i] is None or output[i] is None):
                            raise ValueError("empty value")
                        if where > 0 or (where == 0 and cut.take(t, prompt[i], output[i])):
                            return
                    except ValueError as exc:
                        raise TraceError(f"{path}: row {row}: {exc}") from None
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None


def read_window(path: str | Path, start: float = 0.0, duration: float = 0.0, limit: int = 0) -> TraceWindow:
    """The requests of the window [first + start, first + start + duration) seconds of a trace
    file (duration 0: to the end), at most ``limit`` of them (0: all), in file order."""
    p = Path(path)
    if not p.is_file():
        raise missing("trace file", p)
    cut = _Cut(int(round(start * 1e9)), int(round(duration * 1e9)), limit)
    (_parquet if p.suffix.lower() in (".parquet", ".pq") else _csv)(p, cut)
    if cut.lo is None:
        raise TraceError(f"{p}: no requests")
    if not cut.taken:
        raise TraceError(f"the window ({start:g} s after the first arrival, {duration:g} s long) holds no request")
    return TraceWindow(RequestRows(*(tuple(r[k] for r in cut.taken) for k in range(3))), cut.before)


def read_requests(path: str | Path) -> RequestRows:
    """Every request of a trace file, in time order (the whole file: for small files and tests)."""
    return read_window(path).rows

"""Request traces for kv-decode and spec-decode: when each request arrives and how long it is.

Read: the public Azure LLM inference trace format (Patel et al., "Splitwise", ISCA 2024;
Stojkovic et al., "DynamoLLM", HPCA 2025): a CSV with ``TIMESTAMP`` (a date and time, e.g.
``2023-11-16 18:15:46.6805900``), ``ContextTokens`` and ``GeneratedTokens``; a plain CSV
with the same three columns whose ``TIMESTAMP`` is in seconds; or a Parquet file with the
same columns (a timestamp type, seconds, or the Azure text). Column names are matched
without regard to case; other columns are ignored. Rows are taken in time order.

A run takes a window of the trace (``start`` after its first arrival, ``duration`` long),
at most ``limit`` requests of it, divides the gaps between arrivals by ``speedup`` (a
trace of minutes at a chip's nanosecond scale needs a large one) and cuts lengths above
the caps, counting every cut. Times are integer nanoseconds throughout and cycles are
rounded exactly (``Fraction``), so a trace gives the same arrivals on every machine.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

import numpy as np

from allocators.csv_rows import csv_rows
from allocators.errors import InputError

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and the line or row."""


@dataclass(frozen=True)
class RequestRows:
    """A trace file's requests in time order: arrival (ns), prompt and output tokens."""

    t_ns: tuple[int, ...]
    prompt: tuple[int, ...]
    output: tuple[int, ...]


@dataclass(frozen=True)
class RequestTrace:
    """The requests a run serves: arrival cycles (the first at 0) and lengths, after the window,
    the limit, the speed-up and the caps."""

    arrivals: tuple[int, ...]
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    rows: int  # requests in the file
    in_window: int  # requests in the window (before the limit)
    capped_prompts: int  # prompts cut to the cap
    capped_outputs: int
    span_seconds: float  # simulated seconds from the first to the last arrival taken

    @property
    def arrival_rate(self) -> float:
        """Requests per simulated second, (n - 1) / span (nan for fewer than two arrivals apart)."""
        n = len(self.arrivals)
        return (n - 1) / self.span_seconds if n > 1 and self.span_seconds > 0 else float("nan")


_OFFSET = re.compile(r"(Z|[+-]\d\d:\d\d)$")


def parse_timestamp(text: str) -> int:
    """Nanoseconds from seconds ("12.5") or a date and time ("2023-11-16 18:15:46.6805900",
    UTC unless it ends in an offset, "Z" or "+00:00" as the 2024 trace has; a "T" between
    date and time allowed), exactly: fractions to 9 digits."""
    s = text.strip()
    try:
        seconds = Decimal(s)
    except InvalidOperation:
        seconds = None
    if seconds is not None and seconds.is_finite():
        return int(seconds * 1_000_000_000)
    m = _OFFSET.search(s)
    offset = 0
    if m:
        s = s[:m.start()]
        if m.group(1) != "Z":
            sign = -1 if m.group(1)[0] == "-" else 1
            offset = sign * (int(m.group(1)[1:3]) * 3600 + int(m.group(1)[4:6]) * 60)
    head, _, frac = s.replace("T", " ").partition(".")
    try:
        if frac and not (frac.isdigit() and len(frac) <= 9):
            raise ValueError
        when = datetime.strptime(head, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError:
        raise ValueError(f"TIMESTAMP {text!r} is neither seconds nor YYYY-MM-DD HH:MM:SS[.fraction][offset]") from None
    return (int(when.timestamp()) - offset) * 1_000_000_000 + int(frac.ljust(9, "0") or 0)


def _tokens(text, column: str) -> int:
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        raise ValueError(f"{column} {text!r} is not a whole number") from None
    if not value.is_finite() or value != value.to_integral_value():
        raise ValueError(f"{column} {text!r} is not a whole number")
    if value < 1:
        raise ValueError(f"{column} {text!r}: a request has at least one token")
    return int(value)


def _row(t, prompt, output) -> tuple[int, int, int]:
    t_ns = t if isinstance(t, int) and not isinstance(t, bool) else parse_timestamp(str(t))
    return t_ns, _tokens(prompt, COLUMNS[1]), _tokens(output, COLUMNS[2])


def _rows_csv(path: Path) -> list[tuple[int, int, int]]:
    keys = tuple(c.lower() for c in COLUMNS)
    try:
        _, rows = csv_rows(path.read_text(), keys, others=True)
        out = []
        for line, row in rows:
            try:
                out.append(_row(*(row[k] for k in keys)))
            except ValueError as exc:
                raise InputError(str(exc), line=line) from None
        return out
    except InputError as exc:
        raise TraceError(f"{path}: {exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{path}: not a CSV text file ({exc})") from None


def _rows_parquet(path: Path) -> list[tuple[int, int, int]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None
    names = {n.lower(): n for n in table.column_names}
    missing = [c for c in COLUMNS if c.lower() not in names]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(COLUMNS)}")
    cols = [table[names[c.lower()]] for c in COLUMNS]
    if pa.types.is_timestamp(cols[0].type):
        cols[0] = cols[0].cast(pa.timestamp("ns")).cast(pa.int64())
    elif pa.types.is_integer(cols[0].type) or pa.types.is_floating(cols[0].type):
        cols[0] = cols[0].cast(pa.string())  # seconds, read exactly as text
    out = []
    for i, (t, p, o) in enumerate(zip(*(c.to_pylist() for c in cols))):
        try:
            if t is None or p is None or o is None:
                raise ValueError("empty value")
            out.append(_row(t, p, o))
        except ValueError as exc:
            raise TraceError(f"{path}: row {i + 1}: {exc}") from None
    return out


def read_requests(path: str | Path) -> RequestRows:
    """Every request of a trace file, in time order (ties in file order)."""
    p = Path(path)
    if not p.is_file():
        raise TraceError(f"trace file {str(p)!r} does not exist")
    rows = _rows_parquet(p) if p.suffix.lower() in (".parquet", ".pq") else _rows_csv(p)
    if not rows:
        raise TraceError(f"{p}: no requests")
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])
    return RequestRows(*(tuple(rows[i][k] for i in order) for k in range(3)))


def take(rows: RequestRows, clock_hz: float, start: float = 0.0, duration: float = 0.0, limit: int = 0,
         speedup: float = 1.0, max_prompt: int = 0, max_output: int = 0) -> RequestTrace:
    """The requests of the window [first + start, first + start + duration) seconds (duration 0:
    to the end), at most ``limit`` of them (0: all), as arrival cycles from the first one."""
    t = np.array(rows.t_ns, dtype=np.int64)
    lo = t[0] + int(round(start * 1e9))
    keep = t >= lo
    if duration > 0:
        keep &= t < lo + int(round(duration * 1e9))
    idx = np.flatnonzero(keep)
    in_window = len(idx)
    if limit:
        idx = idx[:limit]
    if not len(idx):
        raise TraceError(f"the window ({start:g} s after the first arrival, {duration:g} s long) holds no request")
    # cycles = ns x clock / (1e9 x speedup), rounded to the nearest (ties to even), exactly
    scale = Fraction(clock_hz) / (Fraction(speedup) * 1_000_000_000)
    first = int(t[idx[0]])
    arrivals = tuple(round((int(t[i]) - first) * scale) for i in idx)
    prompt = [rows.prompt[i] for i in idx]
    output = [rows.output[i] for i in idx]
    cp = sum(1 for x in prompt if max_prompt and x > max_prompt)
    co = sum(1 for x in output if max_output and x > max_output)
    if max_prompt:
        prompt = [min(x, max_prompt) for x in prompt]
    if max_output:
        output = [min(x, max_output) for x in output]
    span = float((int(t[idx[-1]]) - first) / (speedup * 1e9))
    return RequestTrace(arrivals, tuple(prompt), tuple(output), len(rows.t_ns), in_window, cp, co, span)


def format_azure(t_ns: list[int], prompt: list[int], output: list[int]) -> str:
    """CSV text in the Azure trace's format (7 fractional digits, as the published files)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for t, p, o in zip(t_ns, prompt, output):
        sec, ns = divmod(int(t), 1_000_000_000)
        stamp = datetime.fromtimestamp(sec, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        w.writerow([f"{stamp}.{ns // 100:07d}", p, o])
    return out.getvalue()

"""Request traces for kv-decode and spec-decode: when each request arrives, how long it is and
which prompt blocks it shares with others.

The records and the arithmetic: a timestamp in nanoseconds (``parse_timestamp``), the rows
of a window (``TraceWindow``, read by ``request_window.read_window``) and the run's requests
(``take``). The formats read (Azure 2023-2025, Mooncake, Qwen-Bailian, BurstGPT, as their
publishers write them) are described in ``trace_formats.py``; an Azure ``TIMESTAMP`` is a
date and time (``2023-11-16 18:15:46.6805900``; in 2024 ``2024-05-10 00:00:00.009930+00:00``;
in 2025 ``2024-10-15T12:00:00.269Z``) or a number of seconds.

``take`` divides the gaps between arrivals by ``speedup`` (a trace of minutes at a chip's
nanosecond scale needs a large one) and cuts lengths above the caps, counting every cut.
Times are integer nanoseconds throughout and cycles are rounded exactly (``Fraction``), so
a trace gives the same arrivals on every machine.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from sim.serving.prefix_blocks import PrefixBlocks

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(ValueError):
    """A trace file that cannot be read; the message names the file and the line or row."""


def missing(what: str, path: Path) -> TraceError:
    """The error for a trace file that is not there, saying where it was looked for and why there."""
    where = "" if path.is_absolute() else f" (looked for {path.absolute()}: a path in a config file is relative to " \
        "the file, one given by --set to the working directory)"
    return TraceError(f"{what} {str(path)!r} does not exist{where}")


@dataclass(frozen=True)
class RequestRows:
    """Requests in time order: arrival (ns), prompt and output tokens, and the prompts' prefix
    blocks when the trace gives them (Mooncake and Qwen-Bailian ``hash_ids``)."""

    t_ns: tuple[int, ...]
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    blocks: PrefixBlocks | None = None


@dataclass(frozen=True)
class TraceWindow:
    """The requests of a window read from a trace file, and where the window sits in it. The
    reader stops past the window, so the file's own count of requests is not known."""

    rows: RequestRows
    before: int  # requests of the file before the window's start (its first is request before + 1)
    format: str = "azure"  # the format read (request_formats.FORMATS)
    failed: int = 0  # rows of the window the trace marks failed (BurstGPT: no response tokens), skipped
    note: str = ""  # what the format has that a run does not use (said once in the summary)


@dataclass(frozen=True)
class RequestTrace:
    """The requests a run serves: arrival cycles (the first at 0) and lengths, after the window,
    the limit, the speed-up and the caps."""

    arrivals: tuple[int, ...]
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    before: int  # requests of the file before the window (the file's total is not read)
    capped_prompts: int  # prompts cut to the cap
    capped_outputs: int
    span_seconds: float  # simulated seconds from the first to the last arrival taken
    format: str = "azure"
    failed: int = 0  # failed rows of the window, skipped
    note: str = ""
    blocks: PrefixBlocks | None = None  # the prompts' prefix blocks (None: the trace gives none)

    @property
    def arrival_rate(self) -> float:
        """Requests per simulated second, (n - 1) / span (nan for fewer than two arrivals apart)."""
        n = len(self.arrivals)
        return (n - 1) / self.span_seconds if n > 1 and self.span_seconds > 0 else float("nan")


# what strptime("%Y-%m-%d %H:%M:%S") accepts (1-2 digit fields), a "T" allowed, then a fraction
# of up to 9 digits and an offset; the ranges are checked by datetime() below
_EPOCH_DAY = date(1970, 1, 1).toordinal()
_DATE = re.compile(r"(\d{4})-(\d\d?)-(\d\d?)[ T](\d\d?):(\d\d?):(\d\d?)(?:\.(\d{0,9}))?(Z|[+-]\d\d:\d\d)?")


def parse_timestamp(text: str) -> int:
    """Nanoseconds from seconds ("12.5") or a date and time ("2023-11-16 18:15:46.6805900",
    UTC unless it ends in an offset, "Z" or "+00:00" as the 2024 trace has; a "T" between
    date and time allowed), exactly: fractions to 9 digits."""
    s = text.strip()
    m = _DATE.fullmatch(s)
    if m is None:
        try:
            seconds = Decimal(s)
        except InvalidOperation:
            seconds = None
        if seconds is not None and seconds.is_finite():
            return int(seconds * 1_000_000_000)
        raise ValueError(f"TIMESTAMP {text!r} is neither seconds nor YYYY-MM-DD HH:MM:SS[.fraction][offset]")
    y, mo, d, h, mi, sec, frac, zone = m.groups()
    h, mi, sec = int(h), int(mi), int(sec)
    try:
        day = datetime(int(y), int(mo), int(d), h, mi, sec).toordinal() - _EPOCH_DAY
    except ValueError:
        raise ValueError(f"TIMESTAMP {text!r} is neither seconds nor YYYY-MM-DD HH:MM:SS[.fraction][offset]") from None
    offset = 0
    if zone and zone != "Z":
        offset = (-1 if zone[0] == "-" else 1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return (day * 86400 + h * 3600 + mi * 60 + sec - offset) * 1_000_000_000 + int((frac or "").ljust(9, "0"))


def tokens(text, column: str) -> int:
    """A whole number of tokens, at least 1 (``column`` names it in the error)."""
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        raise ValueError(f"{column} {text!r} is not a whole number") from None
    if not value.is_finite() or value != value.to_integral_value():
        raise ValueError(f"{column} {text!r} is not a whole number")
    if value < 1:
        raise ValueError(f"{column} {text!r}: a request has at least one token")
    return int(value)


def take(window: TraceWindow, clock_hz: float, speedup: float = 1.0, max_prompt: int = 0,
         max_output: int = 0) -> RequestTrace:
    """The window's requests as arrival cycles from the first one, lengths cut to the caps."""
    rows = window.rows
    # cycles = ns x clock / (1e9 x speedup), rounded to the nearest (ties to even), exactly
    scale = Fraction(clock_hz) / (Fraction(speedup) * 1_000_000_000)
    first = rows.t_ns[0]
    arrivals = tuple(round((t - first) * scale) for t in rows.t_ns)
    prompt, output = rows.prompt, rows.output
    cp = sum(1 for x in prompt if max_prompt and x > max_prompt)
    co = sum(1 for x in output if max_output and x > max_output)
    if max_prompt:
        prompt = tuple(min(x, max_prompt) for x in prompt)
    if max_output:
        output = tuple(min(x, max_output) for x in output)
    span = float((rows.t_ns[-1] - first) / (speedup * 1e9))
    return RequestTrace(arrivals, prompt, output, window.before, cp, co, span, window.format, window.failed,
                        window.note, rows.blocks)


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

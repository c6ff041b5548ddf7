"""Progress lines on stderr for long runs: done/total, rate and ETA; silent with --quiet."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, label: str, quiet: bool = False, stream=None, every: float = 0.5):
        self.label = label
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.every = every
        self.start = time.perf_counter()
        self._last = 0.0
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: float, total: float, unit: str = "cycles") -> None:
        if self.quiet:
            return
        now = time.perf_counter()
        if now - self._last < self.every and done < total:
            return
        self._last = now
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (total - done) / rate if rate > 0 and total >= done else float("nan")
        line = f"{self.label}: {done:,.0f}/{total:,.0f} {unit} ({rate:,.0f}/s, ETA {eta:,.0f} s)"
        if self._tty:
            self.stream.write("\r" + line.ljust(78))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self, message: str | None = None) -> None:
        if self.quiet:
            return
        if self._tty:
            self.stream.write("\r" + " " * 78 + "\r")
        if message:
            self.stream.write(message + "\n")
        self.stream.flush()

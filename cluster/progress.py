"""Progress lines on stderr for long runs: done/total, rate and ETA; silent with --quiet.

On a terminal or in a Jupyter notebook (whose output draws a carriage return as a redraw
of the line) the line is redrawn in place; anywhere else (a log file, ``ray job logs``)
a line is written at most every ``LOG_EVERY_SECONDS``, so a long sweep logs a few dozen
lines, not thousands. The rate is measured over the recent past (start-up costs such as
starting Ray do not inflate the first ETA), and no ETA is shown until it means
something: a few seconds in, with some progress made. When ``total`` is only an upper
bound (``rdasim run`` stops when its work is done, long before ``run.max_cycles``),
``bound=True`` shows the progress and rate without an ETA.
"""

from __future__ import annotations

import sys
import time
from collections import deque

TTY_EVERY_SECONDS = 0.5
LOG_EVERY_SECONDS = 30.0
ETA_AFTER_SECONDS = 3.0  # no estimate before this much wall time...
ETA_AFTER_FRACTION = 0.02  # ...or before this share of the work is done


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def redraws(stream) -> bool:
    """Whether ``stream`` shows a line rewritten after a carriage return in place: a terminal, or
    the stream a Jupyter kernel sends to a notebook (ipykernel's OutStream, not a terminal)."""
    return (hasattr(stream, "isatty") and stream.isatty()) or type(stream).__module__.startswith("ipykernel")


class Progress:
    def __init__(self, label: str, quiet: bool = False, stream=None, every: float | None = None, bound: bool = False,
                 clock=time.monotonic):
        self.label = label
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self._tty = redraws(self.stream)
        self.every = every if every is not None else (TTY_EVERY_SECONDS if self._tty else LOG_EVERY_SECONDS)
        self.bound = bound
        self.clock = clock
        self.start = clock()
        self._last = self.start
        self._window: deque[tuple[float, float]] = deque([(self.start, 0.0)])  # (time, done) for the rate
        self._drawn = False

    def _rate(self, now: float, done: float) -> float:
        """Units per second over roughly the last half of the elapsed time (at least the last two samples)."""
        if now - self._window[-1][0] >= 0.1:  # a sample every 0.1 s at most: the window stays small
            self._window.append((now, done))
        horizon = now - max((now - self.start) / 2, 1.0)
        while len(self._window) > 2 and self._window[1][0] <= horizon:
            self._window.popleft()
        t0, d0 = self._window[0]
        return (done - d0) / (now - t0) if now > t0 else 0.0

    def __call__(self, done: float, total: float, unit: str = "cycles") -> None:
        if self.quiet:
            return
        now = self.clock()
        rate = self._rate(now, done)
        if now - self._last < self.every or done >= total:  # the end is reported by whoever closes
            return
        self._last = now
        elapsed = now - self.start
        if self.bound:
            line = f"{self.label}: {done:,.0f} {unit} (run stops by {total:,.0f})"
        else:
            line = f"{self.label}: {done:,.0f}/{total:,.0f} {unit}"
        shown = f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.2g}/s"
        if rate > 0:
            line += f", {shown}"
        known = elapsed >= ETA_AFTER_SECONDS and done >= ETA_AFTER_FRACTION * total
        if not self.bound and rate > 0 and known:
            line += f", about {_duration((total - done) / rate)} left"
        self._write(line)

    def _write(self, line: str) -> None:
        if self._tty:
            self.stream.write("\r" + line.ljust(78))
            self._drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self, message: str | None = None) -> None:
        if self.quiet:
            return
        if self._drawn:
            self.stream.write("\r" + " " * 78 + "\r")
        if message:
            self.stream.write(message + "\n")
        self.stream.flush()

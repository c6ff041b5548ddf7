"""Progress lines on stderr for long runs: done/total, rate and ETA; silent with --quiet.

On a terminal or in a Jupyter notebook (whose output draws a carriage return as a redraw
of the line) the line is redrawn in place; anywhere else (a log file, ``ray job logs``)
a line is written every ``LOG_EVERY_SECONDS``, so a long sweep logs a line every few seconds,
not thousands. Work of equal units (cycles) is estimated from the rate over the recent past
(start-up costs such as starting Ray do not inflate the first ETA), and no ETA is shown
until it means something: a few seconds in, with some progress made. Work of unequal items
(a sweep's points, which cost 0.05 s or 40 s) is estimated by ``WorkEta`` from each item's
predicted cost: with costs predicted in seconds (a sweep's, a serve run's anchors') from the
start, the items list-scheduled on the workers; otherwise from the first item run warm; either
way learned as items finish. When
``total`` is only an upper bound (``rdasim run`` stops when its work is done, long before
``run.max_cycles``), ``bound=True`` shows the progress and rate without an ETA.
"""

from __future__ import annotations

import heapq
import math
import sys
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable

TTY_EVERY_SECONDS = 0.5
LOG_EVERY_SECONDS = 5.0
ETA_AFTER_SECONDS = 3.0  # no estimate before this much wall time...
ETA_AFTER_FRACTION = 0.02  # ...or before this share of the work is done


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 600:
        return f"{seconds / 60:.1f} min"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def redraws(stream) -> bool:
    """Whether ``stream`` shows a line rewritten after a carriage return in place: a terminal, or
    the stream a Jupyter kernel sends to a notebook (ipykernel's OutStream, not a terminal)."""
    return (hasattr(stream, "isatty") and stream.isatty()) or type(stream).__module__.startswith("ipykernel")


class Progress:
    def __init__(self, label: str, quiet: bool = False, stream=None, every: float | None = None, bound: bool = False,
                 clock=time.monotonic, eta: Callable[[], float | None] | None = None):
        """``eta``: the seconds left, from an estimator of unequal work (``WorkEta.remaining``), replacing the
        count-rate estimate; None from it means no basis yet (no ETA is shown)."""
        self.label = label
        self.eta = eta
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

    def __call__(self, done: float, total: float, unit: str = "cycles", now_too: bool = False) -> None:
        """A line of ``done`` of ``total`` if one is due (``now_too``: at once, the first of a sweep)."""
        if self.quiet:
            return
        now = self.clock()
        rate = self._rate(now, done)
        if (now - self._last < self.every and not now_too) or done >= total:  # the end is reported by whoever closes
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
        if self.eta is not None:
            left = self.eta()
            if left is not None:
                line += f", about {_duration(left)} left"
        elif not self.bound and rate > 0 and elapsed >= ETA_AFTER_SECONDS and done >= ETA_AFTER_FRACTION * total:
            line += f", about {_duration((total - done) / rate)} left"
        self._write(line)

    def show(self, line: str, now_too: bool = False) -> None:
        """Write ``line`` if a line is due (``every`` seconds since the last), or at once with ``now_too``
        (a new phase); nothing when quiet."""
        if self.quiet:
            return
        now = self.clock()
        if now_too or now - self._last >= self.every:
            self._last = now
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


SHRINK = 0.25  # an effect learned from n items weighs against SHRINK items of no effect: one item does not decide it
LONGER = 0.25  # a running item is expected to run at least this share of what it has run again (heavy tails)
START_UP = 3.0  # a first run on a fresh worker this many times over the warm model's prediction paid its start-up


class WorkEta:
    """The wall time left of a pool of items of unequal cost (a sweep's points, an exploration's runs).

    Each item has a ``prior`` (its relative cost from its config: a NoC point's routers x cycles; 1
    when nothing is known) and ``features`` (its swept values). As items finish, their measured
    seconds correct the prior: ``seconds = prior x scale x effect of each feature value``, fitted so
    that for every feature value the predicted seconds of its finished items add up to the
    measured ones (iterative proportional fitting, each effect shrunk towards 1 by SHRINK items),
    so a policy that deadlocks in 0.1 s and one that runs 40 s are each predicted from their own
    kind and totals are not biased towards the cheap ones. The first item on each worker may
    have paid the worker's start-up (imports, compiling the NoC kernels): there is no basis until
    an item run on a warm worker has finished, and a first item far above the warm items' model
    is counted as done work, not learned from. The time left is every unfinished item's
    prediction (those running: less what they have run, and at least a quarter of it again) over
    the rate at which work has been done since the first item started, and never less than the
    longest running item's remainder.

    Before that basis, with ``unit_seconds`` (the seconds a unit of prior is predicted to cost:
    cluster/sweep/cost.py for a sweep's points, 1 for a serve run's anchors, whose priors are
    seconds) the time left is the predicted seconds list-scheduled on the workers (``planned``:
    each item to the first free worker in the order added, Graham 1966), the running items first
    with what is left of theirs; without it there is no estimate before the basis.
    """

    def __init__(self, parallel: int = 1, clock=time.monotonic, unit_seconds: float | None = None,
                 start_up: float = 0.0):
        self.parallel = max(1, parallel)  # items that can run at once: submitted beyond it, they wait (FIFO)
        self.clock = clock
        self.unit_seconds = unit_seconds
        self.start_up = start_up  # seconds a fresh worker spends before its first item's own work (predicted)
        self.items: dict[Hashable, tuple[tuple, float]] = {}  # key -> (features, prior)
        self.running: dict[Hashable, float] = {}  # item -> when it got a slot
        self.waiting: deque[Hashable] = deque()  # submitted, no slot yet
        self.seconds: dict[Hashable, float] = {}  # finished items' measured seconds
        self.cold: set[Hashable] = set()  # the first item each worker ran
        self.first: float | None = None

    def add(self, key: Hashable, features: Iterable[tuple], prior: float = 1.0) -> None:
        self.items[key] = (tuple(features), max(float(prior), 1e-12))

    def started(self, key: Hashable) -> None:
        """``key`` was submitted: it runs now if a slot is free, else when one frees."""
        now = self.clock()
        self.first = now if self.first is None else self.first
        if len(self.running) < self.parallel:
            self.running[key] = now
            if len(self.cold) < self.parallel:
                self.cold.add(key)
        else:
            self.waiting.append(key)

    def drop(self, key: Hashable) -> None:
        """``key`` will not run after all (nothing learned from it)."""
        self.items.pop(key, None)
        self.running.pop(key, None)
        if key in self.waiting:
            self.waiting.remove(key)

    def finished(self, key: Hashable, seconds: float | None) -> None:
        """``key`` finished after running ``seconds`` (None: as long as it held its slot)."""
        now = self.clock()
        start = self.running.pop(key, None)
        if key in self.waiting:
            self.waiting.remove(key)
        measured = seconds if seconds is not None and seconds > 0 else (now - start if start is not None else 0.0)
        self.seconds[key] = max(measured, 1e-3)
        while self.waiting and len(self.running) < self.parallel:
            self.running[self.waiting.popleft()] = now

    def _fit(self, seen: dict) -> tuple[float, dict]:
        """(scale, {feature: effect}) with the predicted seconds of the items in ``seen`` (key -> seconds)
        matching their measured ones for every feature value: iterative proportional fitting, one
        feature (an axis) at a time, each effect shrunk towards 1 by SHRINK items of no effect."""
        effects: dict = {}
        names = sorted({f[0] for k in seen for f in self.items[k][0]}, key=repr)
        scale = sum(seen.values()) / sum(self.items[k][1] for k in seen)
        for _ in range(10):
            for name in names:
                sums: dict = {}
                for k, measured in seen.items():
                    features, prior = self.items[k]
                    others = scale * prior * math.prod(effects.get(f, 1.0) for f in features if f[0] != name)
                    for f in features:
                        if f[0] == name:
                            m, p, n = sums.get(f, (0.0, 0.0, 0))
                            sums[f] = (m + measured, p + others, n + 1)
                for f, (m, p, n) in sums.items():
                    effects[f] = (m + SHRINK * p / n) / (p + SHRINK * p / n)
            scale = sum(seen.values()) / sum(self.items[k][1] * math.prod(effects.get(f, 1.0) for f in self.items[k][0])
                                             for k in seen)
        return scale, effects

    def _model(self) -> tuple[float, dict] | None:
        """The fitted model, or None before a warm item has finished (no basis); with predicted seconds
        (``unit_seconds``), first items count from the start, less the start-up their prediction had."""
        seen = {k: s for k, s in self.seconds.items() if k not in self.cold and k in self.items}
        if not seen:
            first = {k: max(s - self.start_up, 0.1 * s) for k, s in self.seconds.items()
                     if k in self.cold and k in self.items}
            return self._fit(first) if first and self.unit_seconds is not None else None
        model = self._fit(seen)
        cold = {k: s for k, s in self.seconds.items() if k in self.cold and k in self.items
                and s <= START_UP * self.predict(*self.items[k], model)}
        return self._fit({**seen, **cold}) if cold else model

    def predict(self, features: Iterable[tuple], prior: float, model: tuple[float, dict]) -> float:
        scale, effects = model
        return prior * scale * math.prod(effects.get(f, 1.0) for f in features)

    def remaining(self, extra: Iterable[tuple[Iterable[tuple], float, float]] = ()) -> float | None:
        """Seconds left, or None before an item run on a warm worker has finished. ``extra``: (features, prior,
        count) of items not added yet (an exploration's trials still to ask)."""
        model = self._model() if self.first is not None else None
        if model is None:
            return None if self.unit_seconds is None else self.planned(extra)
        now = self.clock()
        done = sum(self.seconds.values())
        left, longest = 0.0, 0.0
        for key, (features, prior) in self.items.items():
            if key in self.seconds:
                continue
            predicted = self.predict(features, prior, model)
            if key in self.running:  # past its prediction, it is expected to run a while longer still
                ran = now - self.running[key]
                done += min(ran, 0.9 * predicted)
                rest = max(predicted - ran, 0.1 * predicted, LONGER * ran)
                longest = max(longest, rest)
                left += rest
            else:
                left += predicted
        left += sum(self.predict(f, p, model) * n for f, p, n in extra)
        rate = done / max(now - self.first, 1e-9)  # work-seconds done per wall second: the parallelism achieved
        return max(left / rate if rate > 0 else math.inf, longest)

    def planned(self, extra: Iterable[tuple[Iterable[tuple], float, float]] = ()) -> float:
        """Seconds left with every item at its prior times ``unit_seconds``, list-scheduled on the workers:
        each running item keeps its worker for what is left of its prediction (at least LONGER of what it
        has run again), then the others go in order to the first free worker (class docstring); a worker's
        first item pays ``start_up`` too."""
        now, unit = self.clock(), self.unit_seconds or 1.0

        def cost(k, p: float) -> float:
            return p * unit + (self.start_up if k in self.cold else 0.0)

        free = [max(cost(k, p) - (now - self.running[k]), LONGER * (now - self.running[k]))
                for k, (_, p) in self.items.items() if k in self.running]
        free = sorted(free + [0.0] * max(0, self.parallel - len(free)))
        queued = [p * unit for k, (_, p) in self.items.items() if k not in self.running and k not in self.seconds]
        queued += [p * unit for _, p, n in extra for _ in range(int(n))]
        fresh = max(0, self.parallel - len(self.cold))  # workers yet to take a first item
        queued = [q + (self.start_up if i < fresh else 0.0) for i, q in enumerate(queued)]
        for q in queued:
            heapq.heapreplace(free, free[0] + q)
        return max(free)

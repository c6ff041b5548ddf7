"""The MUs' bytes in use and reserved over a run, kept as the results need them.

Every change an MU makes (``delta``) updates, as it happens:

- the shard's totals: their peaks, their time integrals and the bytes in use just before the
  first out-of-memory event, exactly (integer arithmetic over the totals after all changes of
  each cycle). A shard holding the whole chip folds them as it goes; a shard of a cut chip
  cannot (the chip's peak is the peak of the sum of the shards' curves), so it keeps its
  curve, one row per cycle its totals changed, and ``merge`` sums the curves;
- each MU's samples for run_mu_series: the bytes after all changes of every cycle that is a
  multiple of the period. The period starts at ``run.sample_cycles`` and doubles (every other
  sample dropped) whenever a run passes ``MAX_SAMPLES`` samples, so an MU keeps at most that
  many, however long the run.

Nothing here grows with the changes themselves, so a run's memory does not grow with the
tokens it serves. ``keep_log`` (a run writing a Chrome trace) also keeps every
change, for the trace's counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_SAMPLES = 2000  # per MU in run_mu_series
CHUNK = 4096  # curve rows gathered before they are packed into an array


def sample_period(base: int, end: int) -> int:
    """The samples' period for a run of ``end`` cycles: ``base`` doubled until at most MAX_SAMPLES fit."""
    period = max(base, 1)
    while -(-end // period) > MAX_SAMPLES:
        period *= 2
    return period


@dataclass
class Occupancy:
    """One shard's record of its MUs' bytes (see the module docstring)."""

    mus: list[int]  # MU unit ids of the shard
    base_period: int  # run.sample_cycles
    alone: bool  # the shard holds the whole chip: it folds the totals as it goes
    keep_log: bool = False
    log: list = field(default_factory=list)  # (cycle, mu, d_used, d_reserved) when keep_log
    # totals: ``used``/``reserved`` now; ``cycle`` the last cycle they changed at and ``before``
    # the used bytes before that cycle's changes
    used: int = 0
    reserved: int = 0
    cycle: int = -1
    before: int = 0
    peak_used: int = 0
    peak_reserved: int = 0
    used_integral: int = 0  # sum over cycles before ``cycle`` of the used bytes (alone only)
    reserved_integral: int = 0
    oom_used: int = -1  # used bytes just before the shard's first out-of-memory cycle (-1: none yet)
    # the curve of a cut chip's shard: (cycle, d_used, d_reserved) per cycle the totals changed
    _rows: list = field(default_factory=list)
    _chunks: list = field(default_factory=list)
    _cycle_used: int = 0  # changes of ``cycle`` not yet in _rows
    _cycle_reserved: int = 0
    # samples per MU
    period: int = 0
    next_sample: int = 0
    samples: list = field(default_factory=list)  # one int64 [2, mus] array (used, reserved) per sample
    _slot: dict = field(default_factory=dict)
    _now: np.ndarray = field(default_factory=lambda: np.zeros((2, 0), dtype=np.int64))

    def __post_init__(self) -> None:
        self.period = max(self.base_period, 1)
        self._slot = {u: i for i, u in enumerate(self.mus)}
        self._now = np.zeros((2, len(self.mus)), dtype=np.int64)

    def delta(self, now: int, mu: int, used: int, reserved: int) -> None:
        if self.keep_log:
            self.log.append((now, mu, used, reserved))
        if now != self.cycle:
            self._close_cycle(now)
        self.used += used
        self.reserved += reserved
        self._cycle_used += used
        self._cycle_reserved += reserved
        i = self._slot[mu]
        self._now[0, i] += used
        self._now[1, i] += reserved

    def _close_cycle(self, now: int) -> None:
        """The totals move on to cycle ``now``: what they were at the end of ``self.cycle`` is final."""
        if self.cycle >= 0:
            self.peak_used = max(self.peak_used, self.used)
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            if self.alone:
                self.used_integral += (now - self.cycle) * self.used
                self.reserved_integral += (now - self.cycle) * self.reserved
            else:
                self._rows.append((self.cycle, self._cycle_used, self._cycle_reserved))
                if len(self._rows) >= CHUNK:
                    self._pack()
        self._sample_before(now)
        self.cycle, self.before = now, self.used
        self._cycle_used = self._cycle_reserved = 0

    def _pack(self) -> None:
        if self._rows:
            self._chunks.append(np.array(self._rows, dtype=np.int64).reshape(-1, 3))
            self._rows = []

    def _sample_before(self, now: int) -> None:
        """Take every sample due before cycle ``now`` (the bytes after all changes of its cycle)."""
        while self.next_sample < now:
            self.samples.append(self._now.copy())
            self.next_sample += self.period
            if len(self.samples) > MAX_SAMPLES:
                self._coarsen()

    def _coarsen(self) -> None:
        """Double the period: keep the samples at its multiples."""
        self.samples = self.samples[::2]
        self.period *= 2
        self.next_sample = len(self.samples) * self.period

    def note_oom(self, now: int) -> None:
        """An MU of this shard ran out of memory at cycle ``now`` (the shard's first such event is kept)."""
        if self.oom_used < 0:
            self.oom_used = self.before if now == self.cycle else self.used

    def finish(self) -> "OccupancyReport":
        """What the run's figures need, the shard's events all simulated (the run's end, which only
        every shard together knows, closes the totals' last cycle in ``figures``)."""
        self._pack()
        curve = np.concatenate(self._chunks) if self._chunks else np.zeros((0, 3), dtype=np.int64)
        if not self.alone and self.cycle >= 0:  # the last cycle's changes are part of the curve
            curve = np.concatenate([curve, np.array([[self.cycle, self._cycle_used, self._cycle_reserved]])])
        peak_used, peak_reserved = max(self.peak_used, self.used), max(self.peak_reserved, self.reserved)
        samples = np.stack(self.samples) if self.samples else np.zeros((0, 2, len(self.mus)), dtype=np.int64)
        return OccupancyReport(
            self.mus, self.alone, curve, self.cycle, self.used, self.reserved, peak_used, peak_reserved,
            self.used_integral, self.reserved_integral, self.oom_used, self.period, samples, self._now.copy(),
            np.array(self.log, dtype=np.int64).reshape(-1, 4))


@dataclass
class OccupancyReport:
    """A shard's occupancy as it hands it back (plain arrays and ints)."""

    mus: list[int]
    alone: bool
    curve: np.ndarray  # [n, 3] cycle, d_used, d_reserved per cycle its totals changed (cut chips)
    last_cycle: int  # the last cycle its totals changed (-1: never)
    used: int  # totals after it
    reserved: int
    peak_used: int
    peak_reserved: int
    used_integral: int  # over cycles before ``last_cycle`` (alone only)
    reserved_integral: int
    oom_used: int
    period: int
    samples: np.ndarray  # [k, 2, mus]: used and reserved bytes per MU at cycles 0, period, 2 period, ...
    final: np.ndarray  # [2, mus] bytes per MU at the end
    log: np.ndarray  # [n, 4] cycle, mu, d_used, d_reserved (only when kept)


@dataclass(frozen=True)
class OccupancyFigures:
    """The chip's figures from every shard's occupancy."""

    peak_used: int
    peak_reserved: int
    used_integral: int  # over [0, end)
    reserved_integral: int
    oom_used: int  # bytes in use before the first out-of-memory cycle (-1: none)


def figures(reports: list[OccupancyReport], end: int, first_oom: int) -> OccupancyFigures:
    """The chip's totals: folded by a shard holding the whole chip, else from the sum of the
    shards' curves (``first_oom``: the run's first out-of-memory cycle, -1: none)."""
    if len(reports) == 1 and reports[0].alone:
        r = reports[0]
        tail = max(end - r.last_cycle, 0) if r.last_cycle >= 0 else 0
        return OccupancyFigures(r.peak_used, r.peak_reserved, r.used_integral + tail * r.used,
                                r.reserved_integral + tail * r.reserved, r.oom_used if first_oom >= 0 else -1)
    rows = np.concatenate([r.curve for r in reports]) if reports else np.zeros((0, 3), dtype=np.int64)
    if not len(rows):
        return OccupancyFigures(0, 0, 0, 0, 0 if first_oom >= 0 else -1)
    order = np.argsort(rows[:, 0], kind="stable")
    cyc = rows[order, 0]
    last = np.r_[cyc[1:] != cyc[:-1], True]
    cyc = cyc[last]
    used, reserved = np.cumsum(rows[order, 1])[last], np.cumsum(rows[order, 2])[last]
    oom = -1
    if first_oom >= 0:
        i = int(np.searchsorted(cyc, first_oom, side="left")) - 1  # the last change before that cycle
        oom = int(used[i]) if i >= 0 else 0
    return OccupancyFigures(int(used.max()), int(reserved.max()), _integral(cyc, used, end),
                            _integral(cyc, reserved, end), oom)


def _integral(cyc: np.ndarray, val: np.ndarray, end: int) -> int:
    """Integral of the step function ``val`` (from ``cyc`` on) over [0, end)."""
    keep = cyc < end
    c, v = cyc[keep], val[keep]
    return int((np.diff(np.r_[c, end]) * v).sum()) if end > 0 else 0


def mu_samples(reports: list[OccupancyReport], end: int) -> tuple[np.ndarray, list[int], np.ndarray]:
    """(sample cycles, MU ids, [samples, 2, MUs] bytes) over [0, end) at the run's period."""
    period = max([sample_period(r.period, end) for r in reports] or [1])
    cycles = np.arange(0, end, period, dtype=np.int64)
    mus, cols = [], []
    for r in reports:
        step = period // r.period
        have = r.samples[::step][: len(cycles)]  # the samples at multiples of the run's period
        rest = np.repeat(r.final[None], len(cycles) - len(have), axis=0)  # due after its last change
        mus += r.mus
        cols.append(np.concatenate([have, rest]) if len(rest) else have)
    data = np.concatenate(cols, axis=2) if cols else np.zeros((len(cycles), 2, 0), dtype=np.int64)
    return cycles, mus, data

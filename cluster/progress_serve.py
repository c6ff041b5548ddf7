"""A serve run's progress line: which phase it is in, how many anchors are left and how long they will take.

A serve run (sim/workloads/serve) tells a ``ProgressSink`` its phases as events
(sim/workloads/serve/progress.py); ``ServeLine`` is that sink, and also the run's cycle
progress (``cycles``, the ``ProgressFn`` every run's backend calls at each epoch). Its line:

    run serve: planning: the run replayed at its roofline to find the anchors its steps need
    run serve: anchors 3 of 6 simulated, about 3 s left; 0.272 s simulated, past the trace's last arrival at 0.01 s
    run serve: serving: 12.3 of the trace's 60 s simulated, 0.51 s a second, the last arrival in about 1.5 min

The anchors' time left is ``WorkEta`` on their predicted seconds (anchor_seconds), list-scheduled
on the run's workers from the start and rescaled by each anchor that finishes. A run that
tells no event (any other workload) shows the cycles line of ``Progress``, as before.
"""

from __future__ import annotations

from cluster.progress import Progress, WorkEta, _duration
from sim.workloads.serve.progress import (
    AnchorDone,
    AnchorDropped,
    AnchorStarted,
    Event,
    Planned,
    PlannedAnchor,
    Planning,
    Served,
    Waiting,
)

PLANNING, ANCHORS, SERVING = "planning", "anchors", "serving"


class ServeLine:
    """The sink of a serve run's events and its cycle progress, drawn as one line (module docstring)."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.phase: str | None = None  # None: no event yet, the cycles line
        self.phases: list[str] = []  # every phase entered, in order (a phase entered again is listed again)
        self.eta: WorkEta | None = None
        self.foreseen = False  # a planning pass counted the anchors (else counted as they start)
        self.workers = 1
        self.done = 0  # anchors finished
        self.total = 0  # anchors this run simulates: foreseen, and those started that were not
        self.served = (0.0, 0.0)  # (simulated seconds, the trace's span)
        self.serving_from: tuple[float, float] | None = None  # (wall, simulated seconds) serving began at

    # ------------------------------------------------------------------ the run's cycles (ProgressFn)
    def cycles(self, done: int, total: int) -> None:
        if self.phase is None:
            self.progress(done, total)
        else:
            self._draw()

    # ------------------------------------------------------------------ the sink
    def __call__(self, event: Event) -> None:
        if isinstance(event, Planning):
            self._enter(PLANNING)
        elif isinstance(event, Planned):
            self._planned(event.anchors, event.workers, event.start_up)
        elif isinstance(event, AnchorStarted):
            self._started(event.anchor)
        elif isinstance(event, AnchorDone):
            self.done += 1
            if self.eta is not None:
                self.eta.finished(event.shape, None if event.cached else event.wall_seconds)
            self._enter(ANCHORS if self.done < self.total else SERVING)
        elif isinstance(event, AnchorDropped):
            self.total -= 1
            if self.eta is not None:
                self.eta.drop(event.shape)
            self._enter(ANCHORS if self.done < self.total else SERVING)
        elif isinstance(event, Served):
            self.served = (event.seconds, event.span)
            self._enter(self.phase if self.phase in (ANCHORS,) else SERVING)
        elif isinstance(event, Waiting):
            self._draw()

    def _planned(self, anchors: tuple[PlannedAnchor, ...], workers: int, start_up: float) -> None:
        self.foreseen, self.workers, self.total, self.done = True, workers, len(anchors), 0  # a new count
        self.eta = WorkEta(workers, clock=self.progress.clock, unit_seconds=1.0, start_up=start_up)
        for a in anchors:
            self.eta.add(a.shape, (("compute_bound", a.compute_bound),), a.seconds)
            if workers > 1:  # handed to the workers at once, taken in this order
                self.eta.started(a.shape)
        self._enter(ANCHORS if anchors else SERVING)

    def _started(self, a: PlannedAnchor) -> None:
        if self.eta is None:
            self.eta = WorkEta(1, clock=self.progress.clock, unit_seconds=1.0)
        if a.shape not in self.eta.items:  # not foreseen: one more
            self.total += 1
            self.eta.add(a.shape, (("compute_bound", a.compute_bound),), a.seconds)
        self.eta.started(a.shape)
        self._enter(ANCHORS)

    def _enter(self, phase: str) -> None:
        new = phase != self.phase
        if new:
            self.phase = phase
            self.phases.append(phase)
            if phase == SERVING:
                self.serving_from = (self.progress.clock(), self.served[0])
        self._draw(now_too=new)

    # ------------------------------------------------------------------ the line
    def line(self) -> str:
        """The line as it reads now."""
        label = self.progress.label
        if self.phase == PLANNING:
            return f"{label}: planning: the run replayed at its roofline to find the anchors its steps need"
        if self.phase == ANCHORS:
            text = f"{label}: anchors {self.done} of {self.total} simulated" + ("" if self.foreseen else " so far")
            left = self.eta.remaining() if self.eta is not None else None
            if left is not None and left != float("inf"):
                text += f", about {_duration(left)} left"
            if self.served[0] > 0:
                text += f"; {self._trace()}"
            return text
        seconds, span = self.served
        text = f"{label}: serving: {self._trace()}"
        if self.serving_from is not None:
            wall = self.progress.clock() - self.serving_from[0]
            rate = (seconds - self.serving_from[1]) / wall if wall > 0 else 0.0
            if rate > 0:
                text += f", {rate:.2g} s a second"
                if seconds < span:
                    text += f", the last arrival in about {_duration((span - seconds) / rate)}"
        return text

    def _trace(self) -> str:
        seconds, span = self.served
        if seconds < span:
            return f"{seconds:.3g} of the trace's {span:.3g} s simulated"
        return f"{seconds:.3g} s simulated, past the trace's last arrival at {span:.3g} s"

    def _draw(self, now_too: bool = False) -> None:
        self.progress.show(self.line(), now_too)

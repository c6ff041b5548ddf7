"""The serving scheduler's seam: what a scheduler is asked each step and what it answers.

A scheduler is a task on the unit that schedules (a CU, or a system's first chip): it yields
what it waits for (sim/tasks.py) and loops ``schedule`` then ``update`` until no request is
left. ``schedule`` admits what arrived and plans the next step (which requests run, tokens each,
KV granted, who was preempted to make room); ``update`` runs that step and settles it (tokens
made, blocked steps preempted, requests ended). Both answer with the step's record
(output.py); a run that keeps step records (a traced one) hands each to ``on_step``.
"""

from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

from sim.serving.scheduling.output import SchedulerOutput
from sim.tasks import Task

StepSink = Callable[[SchedulerOutput], None]


@runtime_checkable
class Scheduler(Protocol):
    """A serving scheduler (registered in ``SCHEDULERS``)."""

    def has_unfinished(self) -> bool:
        """Whether any request is still waiting, being admitted or running."""
        ...

    def schedule(self) -> Task:
        """Task: admit what arrived and plan the next step; returns its SchedulerOutput, or None
        when no step can run again (every request ended, or nothing can go on)."""
        ...

    def update(self, planned: SchedulerOutput) -> Task:
        """Task: run the planned step and settle it; returns its SchedulerOutput completed (tokens
        made, preemptions, requests ended), or None if the step could not run (every request then
        ended failed)."""
        ...

    def run(self) -> Task:
        """The scheduler's task: ``schedule`` and ``update`` until ``schedule`` answers None."""
        ...

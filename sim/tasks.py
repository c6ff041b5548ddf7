"""Tasks: generators that yield a record of what they wait for, and the one trampoline that runs them.

A CU's tasks yield ``Sleep``, ``Compute`` or ``Replies`` (sim/chip/units.py), a box chip's
``Compute``, ``Sleep`` or ``Recv`` (sim/system/shard.py). A ``TaskDispatch`` holds, per record
type, the handler its owner (the CU or the chip) reacts with: the handler either parks the
task (a timer or a message resumes it later: it returns ``PARKED``) or returns the value the
task goes on with at once. The table is built once per kind of owner, never changed.
"""

from __future__ import annotations

from typing import Any, Callable, Generator, Generic, Mapping, TypeVar

Owner = TypeVar("Owner")
Task = Generator[Any, Any, Any]


class Parked:
    """What a handler returns when its task waits (for a timer, a message, the pipeline)."""

    def __repr__(self) -> str:
        return "PARKED"


PARKED = Parked()


class TaskDispatch(Generic[Owner]):
    """Runs an owner's task until it waits or ends, handing each yielded record to the
    handler of its type (a subclass of a record type takes its base's handler)."""

    def __init__(self, what: str, handlers: Mapping[type, Callable[[Owner, Task, Any], Any]]) -> None:
        self.what = what  # "a task", "a chip task" (for the error naming what was yielded)
        self.handlers = dict(handlers)

    def run(self, owner: Owner, task: Task, value: Any = None) -> None:
        """Send ``value`` into ``task`` and go on until a handler parks it or it returns."""
        handlers = self.handlers
        while True:
            try:
                w = task.send(value)
            except StopIteration:
                return
            handler = handlers.get(type(w)) or self._of_base(w)
            value = handler(owner, task, w)
            if value is PARKED:
                return

    def _of_base(self, w: object) -> Callable[[Owner, Task, Any], Any]:
        for base in type(w).__mro__[1:]:
            if base in self.handlers:
                return self.handlers[base]
        names = [t.__name__ for t in self.handlers]
        raise TypeError(f"{self.what} yielded {w!r}; expected {', '.join(names[:-1])} or {names[-1]}")

"""User-facing errors: the CLI turns these into one clear message and exit status 2."""

from __future__ import annotations

import contextlib
import signal
from dataclasses import dataclass


class UserError(Exception):
    """Bad input from the user (config, file, option). Printed without a traceback, exit 2."""

    exit_status = 2

    def __init__(self, message: str, details: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.details = list(details or [])

    def __str__(self) -> str:
        return "\n".join([self.message] + [f"  {d}" for d in self.details])

    def render(self) -> str:
        lines = [f"error: {self.message}"]
        lines += [f"  {d}" for d in self.details]
        return "\n".join(lines)


# Exit statuses of every rdasim command (README "Exit status"); a KubeRay RayJob or a
# script can tell "fix the input" (2) from "retry" (1) from "look at the results" (3-7).
EXIT_OK = 0
EXIT_CRASH = 1  # an unexpected error (a traceback), or results that could not be written
EXIT_USAGE = 2  # bad input: config, option, output path; nothing ran
EXIT_POINTS_FAILED = 3  # rdasim sweep: finished, but some points did not complete (deadlocked, cut off, failed, error)
EXIT_RUN_STATUS = {"completed": EXIT_OK, "deadlocked": 4, "cut_off": 5, "failed": 6}  # rdasim run
EXIT_NO_ANSWER = 7  # rdasim map: infeasible; rdasim alloc plan: does not fit, or an invalid placement
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT); SIGTERM gives 143
# a result's status (cluster/results/record.py) -> the command's exit status: a run's, a NoC
# curve's (interrupted: the loads that finished are kept) and a mapping's (rdasim map)
EXIT_STATUS = {**EXIT_RUN_STATUS, "interrupted": EXIT_INTERRUPTED, "optimal": EXIT_OK, "feasible": EXIT_OK,
               "infeasible": EXIT_NO_ANSWER, "unusable": EXIT_NO_ANSWER}


class Terminated(BaseException):
    """A termination signal (SIGTERM: ``kill``, ``ray job stop``, a scheduler's time limit) once the run has
    recorded itself interrupted: the command exits 128 + the signal with one line."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


@dataclass
class TerminationSignal:
    """SIGTERM handled as Ctrl-C is (a KeyboardInterrupt, which Ray's waits let through where another exception
    would become its SystemError), remembering that it was SIGTERM: ``installed`` turns it into Terminated."""

    signum: int | None = None

    def __call__(self, signum, frame) -> None:  # noqa: ARG002 - a signal handler's signature
        self.signum = signum
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self):
        """SIGTERM handled by this while the block runs (a command that records its run: sweep, explore)."""
        previous = signal.signal(signal.SIGTERM, self)
        try:
            yield self
        except KeyboardInterrupt:
            if self.signum is not None:
                raise Terminated(self.signum) from None
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)


class SaveError(UserError):
    """The work is done but its files could not be written (the result was printed instead)."""

    exit_status = EXIT_CRASH


class WriteError(UserError):
    """A file could not be written (a full disk, a quota, a read-only mount): one line naming it, exit 1.
    Written atomically (cluster/results/io.py), so nothing half-written is left behind."""

    exit_status = EXIT_CRASH

    def __init__(self, message: str, path: object = None, reason: str = ""):
        super().__init__(message)
        self.path, self.reason = path, reason

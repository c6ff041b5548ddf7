"""User-facing errors: the CLI turns these into one clear message and exit status 2."""

from __future__ import annotations


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

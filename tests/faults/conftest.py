"""Fault injection: the command line run as a user would, in a child process, under a memory limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 3 << 30  # address space of a child: a huge input must be refused, not allocated


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def rdasim(*args, timeout: float = 60, limit: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m cluster.cli ARGS`` from this tree, its address space capped at MEMORY_LIMIT."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run([sys.executable, "-m", "cluster.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd or ROOT, preexec_fn=_limit if limit else None)


def in_process(*args) -> subprocess.CompletedProcess:
    """``cluster.cli.main(ARGS)`` in this process (no interpreter start-up: 0.1 s, not 2), its output captured."""
    import contextlib
    import io

    from cluster.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The message of a refused command: exit 2, no traceback; returns stderr."""
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return done.stderr


@pytest.fixture
def cli():
    return rdasim

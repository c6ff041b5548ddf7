"""One process at a time runs or compacts a sweep: an advisory lock on DIR/_<name>.lock.

A compaction moves rows between files that a running sweep writes, so the two must not
overlap (nor two drivers of one sweep). The lock is ``flock`` on a file beside the manifest:
the kernel drops it when its process ends, however it ends, so a killed driver never leaves
a sweep locked. The file holds who holds the lock, for the message of whoever waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Iterator

from cluster.errors import UserError
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.manifest import now


@contextlib.contextmanager
def sweep_lock(layout: DatasetLayout, doing: str) -> Iterator[None]:
    """Hold the sweep's lock while ``doing`` (running, compacting); refuse at once if another process holds it."""
    layout.lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"sweep {layout.name!r} in {str(layout.root)!r} is busy: {_holder(fd)}; "
                            f"wait for it to end before {doing} it") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "doing": doing,
                                 "since": now()}).encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)  # released below; an empty file says nobody holds it
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        who = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        who = {}
    if not who:
        return "another process holds its lock"
    return f"process {who.get('pid')} on {who.get('host')} has been {who.get('doing')} it since {who.get('since')}"

"""Atomic result files: write to a temporary name in the same directory, then rename.

A failed or interrupted run therefore never leaves a half-written Parquet, CSV or JSON
file behind: readers see either the old file, the complete new one, or nothing. Files
get the mode the umask allows (``mkstemp`` alone would leave them 0600, unreadable to
the rest of a group on shared cluster storage). ``check_dir``/``check_file`` try an
output path before any work starts, so a bad ``--out`` costs a second, not a run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import socket
import tempfile
from pathlib import Path

from cluster.errors import UserError, WriteError

# a temporary file's name says which process writes it: ".<final name>.<host>_<pid>.<random>.tmp"
_WRITER = re.compile(r"\.(?P<host>\w+)_(?P<pid>\d+)\.\w+\.tmp$")


def _host() -> str:
    return re.sub(r"\W", "_", socket.gethostname()) or "host"


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path next to ``path``; rename it into place only on success."""
    final = Path(path)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = _new_temporary(final)
    except OSError as exc:
        if exc.errno in NOT_WRITTEN:
            raise _write_error(final, exc) from None
        raise
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in NOT_WRITTEN:
            raise _write_error(final, exc) from None
        raise


NOT_WRITTEN = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EIO, errno.EFBIG}


def _write_error(path: Path, exc: OSError) -> WriteError:
    return WriteError(f"{path}: cannot write: {os.strerror(exc.errno) if exc.errno else exc}", path=path,
                      reason=os.strerror(exc.errno) if exc.errno else str(exc))


def _new_temporary(final: Path) -> Path:
    """A new empty file beside ``final`` named for its writer, with the mode open() gives a file (the kernel
    applies the umask: no chmod, no reading the umask, on each of a sweep's 10^5 writes)."""
    while True:
        tmp = final.with_name(f".{final.name}.{_host()}_{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def writer_gone(tmp: Path) -> bool:
    """Whether the process that wrote temporary file ``tmp`` (``atomic_path``) has ended: it ran
    on this host and no process has its id. False when that cannot be told (another host's)."""
    m = _WRITER.search(tmp.name)
    if m is None or m["host"] != _host():
        return False
    try:
        os.kill(int(m["pid"]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def umask() -> int:
    """The process umask, read without changing it where the kernel reports it."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)  # elsewhere the only way to read it is to set it (and put it back)
    os.umask(old)
    return old


class OutputError(UserError):
    """An output path that cannot be written (exit 2); the message names the path and the reason."""


def _dir_problem(d: Path) -> str | None:
    """Why no file can be written in directory ``d``, or None. Nothing is left behind: a directory
    not there yet is made by the first file written into it (``atomic_path``), so a command that
    fails on its input after this check leaves no empty directory; the probe is a file created
    and removed in ``d``, or in the nearest existing directory above it."""
    if d.exists() and not d.is_dir():
        return f"{str(d)!r} is a file, not a directory"
    base = d
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        return f"{str(base)!r} is a file, not a directory"
    try:
        fd, probe = tempfile.mkstemp(prefix=".rdasim-probe.", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write in {str(base)!r} ({(exc.strerror or str(exc)).lower()})"
    return None


def check_dir(path: str | Path, what: str = "--out") -> Path:
    """Prove a file can be written in directory ``path`` (made when its first file is), before any work."""
    d = Path(path)
    why = _dir_problem(d)
    if why:
        raise OutputError(f"{what} {str(path)}: {why}")
    return d


def check_file(path: str | Path, what: str) -> Path:
    """Prove ``path`` can be written as a file (its directory writable, itself not a directory)."""
    f = Path(path)
    why = f"{str(path)!r} is a directory, expected a file name" if f.is_dir() else _dir_problem(f.parent)
    if why:
        raise OutputError(f"{what} {str(path)}: {why}")
    return f


def write_json(obj, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    return Path(path)


def write_text(text: str, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)

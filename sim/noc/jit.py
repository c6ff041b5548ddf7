"""Compiling the NoC kernels: numba's ``njit`` with an on-disk cache that also works read-only.

Each kernel module keeps every compiled function it calls in its own file: numba keys a
cached kernel by the source of the file that defines it, so a change to a helper in another
file would not invalidate it.

Where the cache lives (numba's locators, first that is writable): ``NUMBA_CACHE_DIR`` when
set; the ``__pycache__`` beside the source (an editable or user-writable install); the
user-wide cache directory (``~/.cache/numba`` on Linux: a read-only install). When none of
these can be written (read-only install and home), a per-user directory under the system's
temporary directory is used, so the import never fails and later runs still start warm.
"""

from __future__ import annotations

import os
import tempfile

import numba
from numba.core import caching


def _cache_dir_writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
        return True
    except OSError:
        return False


def _ensure_cache_location() -> None:
    """Point numba at a temporary cache directory when neither its in-tree nor its
    user-wide locator can write (numba would otherwise refuse to compile with cache=True)."""
    config = numba.config  # module attributes read from the environment when numba loads
    if config.CACHE_DIR:  # type: ignore[attr-defined]
        return
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    user = caching.AppDirs(appname="numba", appauthor=False).user_cache_dir
    if _cache_dir_writable(here) or _cache_dir_writable(user):
        return
    config.CACHE_DIR = os.path.join(tempfile.gettempdir(), f"rdasim-numba-{os.getuid()}")  # type: ignore[attr-defined]


_ensure_cache_location()


def kernel(fn):
    """Compile ``fn`` to machine code once, cached on disk (numpy's error model: no
    Python exception checks on integer division in the hot loops)."""
    return numba.njit(cache=True, nogil=True, error_model="numpy", _nrt=False)(fn)


def inline(fn):
    """A helper of a kernel, inlined into its callers: a compiled call that passes arrays
    costs a reference-count update per array, far more than the helper's arithmetic."""
    return numba.njit(cache=True, nogil=True, error_model="numpy", inline="always", _nrt=False)(fn)

"""Compiling the NoC kernels: numba's ``njit`` with an on-disk cache that also works read-only.

A cached kernel is stale as soon as any file of the NoC packages it is built from changes:
its stamp hashes every module of its own package and of this one, and sim/rng.py, whose
hash the traffic kernel compiles in (numba's own stamp hashes only the kernel's file, so a
changed helper, constant or compile option elsewhere would keep running the old machine
code).

Where the cache lives (the first that can be written): ``NUMBA_CACHE_DIR`` when set; the
``__pycache__`` beside the sources (an editable or user-writable install); numba's
user-wide directory (``~/.cache/numba`` on Linux: a read-only install); a per-user
directory under the system's temporary directory (read-only install and home), so a
read-only install never fails to start and later runs still load the machine code.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

import numba
from llvmlite import ir
from numba.core import caching, types
from numba.extending import intrinsic

_HERE = os.path.dirname(os.path.abspath(__file__))
_SHARED = (os.path.join(os.path.dirname(_HERE), "rng.py"),)  # modules outside these packages kernels compile in


def _stamp(py_file: str) -> str:
    """Hash of every module of the kernel's package and of this one, and of ``_SHARED``."""
    h = hashlib.sha256()
    files = [os.path.join(d, name) for d in sorted({_HERE, os.path.dirname(os.path.abspath(py_file))})
             for name in sorted(os.listdir(d)) if name.endswith(".py")]
    for path in files + [p for p in _SHARED if os.path.exists(p)]:
        with open(path, "rb") as fh:
            h.update(os.path.basename(path).encode() + b"\0" + fh.read())
    return h.hexdigest()


class _PackageStamp:
    _py_file: str

    def get_source_stamp(self) -> str:
        return _stamp(self._py_file)


class _Given(_PackageStamp, caching.UserProvidedCacheLocator):
    """``NUMBA_CACHE_DIR``."""


class _InTree(_PackageStamp, caching.InTreeCacheLocator):
    """``__pycache__`` beside the sources."""


class _UserWide(_PackageStamp, caching.UserWideCacheLocator):
    """numba's user-wide cache directory."""


class _Temporary(_PackageStamp, caching.InTreeCacheLocator):
    """A per-user directory under the system's temporary directory."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(tempfile.gettempdir(), f"rdasim-numba-{os.getuid()}",
                                        self.get_suitable_cache_subpath(py_file))


class _Impl(caching.CompileResultCacheImpl):
    _locator_classes = [_Given, _InTree, _UserWide, _Temporary]


class _Cache(caching.FunctionCache):
    _impl_class = _Impl


def _compiled(fn, **options):
    disp = numba.njit(nogil=True, error_model="numpy", _nrt=False, **options)(fn)
    disp._cache = _Cache(fn)  # what njit(cache=True) sets up, with the locators above
    return disp


def kernel(fn):
    """Compile ``fn`` to machine code once, cached on disk. No Python exception checks on
    integer division (numpy's error model) and no reference counting (a kernel allocates
    no arrays; a count per array passed to a helper cost more than the helper's work)."""
    return _compiled(fn)


def inline(fn):
    """A helper of a kernel, inlined into its callers."""
    return _compiled(fn, inline="always")


@intrinsic
def prefetch(typingctx, ary, offset):
    """Hint the CPU to bring the cache line at byte ``offset`` of array ``ary``'s data into
    its caches (LLVM's ``llvm.prefetch``: read, keep in every level): a kernel that knows
    which rows it will touch a little later asks for them while it works on others."""
    sig = types.void(ary, offset)

    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        off = context.cast(builder, args[1], sig.args[1], types.intp)
        i8p = ir.IntType(8).as_pointer()
        ptr = builder.gep(builder.bitcast(a.data, i8p), [off])
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], fnty)
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen

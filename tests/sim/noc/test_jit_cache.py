"""The compiled kernels' cache works from a read-only install (sim/noc/jit.py).

sim/noc/jit.py and a small kernel compiled by it are copied to a read-only directory and
run twice by a process without the capability to override file permissions, with a
read-only home: nothing may be written beside the sources, the machine code must land in
the fallback directory, and the second run must load it from there instead of compiling.
"""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sim.noc import jit

PROBE = '''
from jit import kernel

@kernel
def twice(x):
    return 2 * x
'''

RUN = '''
import probe
assert probe.twice(21) == 42
print(probe.twice.stats.cache_hits.get(probe.twice.signatures[0], 0))
'''


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@pytest.mark.skipif(os.name != "posix" or shutil.which("setpriv") is None or os.geteuid() != 0,
                    reason="needs setpriv and root to drop the capability of writing anywhere")
def test_cache_of_a_read_only_install_goes_to_the_fallback_and_is_reused(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(jit.__file__, site / "jit.py")
    (site / "probe.py").write_text(PROBE)
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    _read_only(site)
    _read_only(home)
    env = {**os.environ, "PYTHONPATH": str(site), "HOME": str(home), "TMPDIR": str(tmp),
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)
    cmd = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--", sys.executable, "-c", RUN]
    try:
        runs = [subprocess.run(cmd, env=env, capture_output=True, text=True) for _ in range(2)]
    finally:
        for p in [tmp_path, *tmp_path.rglob("*")]:  # let pytest clean up
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:]
    assert [r.stdout.split() for r in runs] == [["0"], ["1"]]  # compiled, then loaded from the cache
    assert not [p for p in site.rglob("*") if p.suffix in (".nbi", ".nbc") or p.name == "__pycache__"]
    assert list((tmp / f"rdasim-numba-{os.getuid()}").rglob("*.nbi"))  # the fallback directory


def test_a_changed_module_of_the_package_invalidates_the_cached_kernel(tmp_path):
    # numba alone keys a cached kernel by its own file: a changed constant imported from a
    # sibling module would keep the old machine code running
    shutil.copy(jit.__file__, tmp_path / "jit.py")
    (tmp_path / "factor.py").write_text("FACTOR = 2\n")
    (tmp_path / "probe.py").write_text(PROBE.replace("2 * x", "FACTOR * x").replace(
        "from jit import kernel", "from jit import kernel\nfrom factor import FACTOR"))
    run = ["import probe", "print(probe.twice(21), probe.twice.stats.cache_hits.get(probe.twice.signatures[0], 0))"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)

    def answer() -> list[str]:
        return subprocess.run([sys.executable, "-c", "\n".join(run)], env=env, capture_output=True, text=True,
                              check=True).stdout.split()

    assert answer() == ["42", "0"] and answer() == ["42", "1"]  # compiled, then loaded
    (tmp_path / "factor.py").write_text("FACTOR = 3\n")
    assert answer() == ["63", "0"]  # recompiled with the new constant

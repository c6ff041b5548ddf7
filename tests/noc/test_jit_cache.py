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
import numba
import probe
assert probe.twice(21) == 42
print(numba.config.CACHE_DIR, probe.twice.stats.cache_hits.get(probe.twice.signatures[0], 0))
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
    first, second = (r.stdout.split() for r in runs)
    fallback = str(tmp / f"rdasim-numba-{os.getuid()}")
    assert first == [fallback, "0"]  # compiled, and cached in the fallback directory
    assert second == [fallback, "1"]  # loaded from there
    assert not [p for p in site.rglob("*") if p.suffix in (".nbi", ".nbc") or p.name == "__pycache__"]
    assert list(Path(fallback).rglob("*.nbi"))

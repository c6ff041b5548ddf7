"""Which code produced a result: the package version, and in a git checkout its commit and
whether the code differed from it.

An edited checkout still says ``0.1.0``, so every result row and sweep manifest also
carries the commit and a dirty flag; the ``digest`` (a hash of the uncommitted changes)
tells two different edits of one commit apart, so a resumed sweep can refuse to mix
them. Outside a checkout (a wheel, a container) the commit and flag are unknown (None).
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE_PATHS = ("sim", "mapping", "allocators", "cluster", "rdasim", "pyproject.toml")  # what decides a result


def package_version() -> str:
    try:
        return metadata.version("rdasim")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "0+unknown"


@dataclass(frozen=True)
class CodeVersion:
    version: str  # the package version
    commit: str | None  # git commit of the checkout the code runs from (None: not a checkout)
    dirty: bool | None  # tracked or new code files differ from that commit
    digest: str | None = None  # hash of those differences (None when clean)

    @property
    def label(self) -> str:
        """``0.1.0``, ``0.1.0+g1a2b3c4d5e6f`` or ``0.1.0+g1a2b3c4d5e6f.dirty.<digest>``."""
        if self.commit is None:
            return self.version
        return f"{self.version}+g{self.commit[:12]}" + (f".dirty.{self.digest}" if self.dirty else "")

    def to_json(self) -> dict:
        return asdict(self)


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True, timeout=20).stdout


@functools.cache
def code_version() -> CodeVersion:
    """The running code's version; git is asked once per process."""
    version = package_version()
    if not (ROOT / ".git").exists() or not (ROOT / "pyproject.toml").is_file():
        return CodeVersion(version, None, None)
    try:
        commit = _git("rev-parse", "HEAD").decode().strip()
        changed = _git("status", "--porcelain", "--untracked-files=all", "--", *CODE_PATHS).decode().splitlines()
        if not changed:
            return CodeVersion(version, commit, False)
        h = hashlib.sha256(_git("diff", "HEAD", "--", *CODE_PATHS))
        for line in sorted(changed):  # new files are not in the diff: hash their contents
            name = ROOT / line[3:]
            if line.startswith("??") and name.is_file():
                h.update(line.encode() + name.read_bytes())
        return CodeVersion(version, commit, True, h.hexdigest()[:12])
    except (OSError, subprocess.SubprocessError):  # no git, or not a repository after all
        return CodeVersion(version, None, None)

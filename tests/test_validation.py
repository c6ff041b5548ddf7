"""docs/validation.md's commands run: every comparison the page lists reproduces from the command
written under it, as a reader types it (``rdasim`` being this checkout's command line). The two
that take minutes run with ``-m slow``; their benchmarks' ``--smoke`` runs in the suite
(tests/test_benchmarks.py)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.paths import ROOT

PAGE = ROOT / "docs" / "validation.md"
SLOW = ("benchmarks/alloc_quality.py", "benchmarks/step_reproduction.py", "benchmarks/node_scale.py")  # minutes each


def sections() -> dict[str, list[str]]:
    """{section title: the commands of its ```sh blocks}."""
    out: dict[str, list[str]] = {}
    title = ""
    for part in re.split(r"^(## .+)$", PAGE.read_text(), flags=re.M):
        if part.startswith("## "):
            title = part[3:].strip()
            continue
        for block in re.findall(r"```sh\n(.*?)```", part, flags=re.S):
            out.setdefault(title, []).extend(x.strip() for x in block.splitlines() if x.strip())
    return out


def commands():
    for cmds in sections().values():
        for cmd in cmds:
            marks = [pytest.mark.slow] if any(s in cmd for s in SLOW) else []
            yield pytest.param(cmd, id=cmd[:60], marks=marks)


def test_every_comparison_has_a_command():
    text = PAGE.read_text()
    titles = re.findall(r"^## (.+)$", text, flags=re.M)
    cmds = sections()
    assert titles and all(cmds.get(t) for t in titles), [t for t in titles if not cmds.get(t)]
    assert "STEP_RESULTS" not in text


@pytest.mark.parametrize("cmd", list(commands()))
def test_the_command_runs(cmd):
    argv = shlex.split(cmd)
    if argv[0] == "rdasim":  # this checkout's command line, not an installed one
        argv = [sys.executable, "-m", "cluster.cli", *argv[1:]]
    elif argv[0] == "python":
        argv[0] = sys.executable
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"

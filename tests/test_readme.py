"""The README's promises: two set-up commands (CI runs the test one), at most 200 lines, and
every `rdasim` command in its code blocks runs and ends as the README says."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

README = (ROOT / "README.md").read_text()
MAX_LINES = 200
# Commands that take more than ~20 s on a 2-core machine (Ray's start included): run with -m slow.
SLOW = {
    "rdasim run examples/moe_mixtral.toml --shards 4 --backend ray --json",
    "rdasim sweep examples/sweep_noc.toml --out results",
    "rdasim explore examples/explore_kv.toml --out results/explore --budget 6 --in-process --json",
    "rdasim run examples/mapped_decode_sn40l.toml",  # about 20 s; benchmarks/real_scale.py runs it
}


def _setup_commands() -> list[str]:
    section = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's Set-up section has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@dataclass(frozen=True)
class ReadmeCommand:
    """One `rdasim ...` line of a README code block, and the earlier lines of its block whose
    output it reads (`rdasim sweep status results` after `rdasim sweep ... --out results`)."""

    line: str
    block: int
    needs: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.line, comments=True)

    @property
    def status(self) -> int:
        """The exit status the line's comment promises ("exits 4"), else 0."""
        m = re.search(r"#.*\bexits? (\d+)", self.line)
        return int(m.group(1)) if m else 0

    @property
    def slow(self) -> bool:
        return any(_bare(x) in SLOW for x in (self.line, *self.needs))


def _bare(line: str) -> str:
    return " ".join(shlex.split(line, comments=True))


def _out_dir(argv: list[str]) -> str | None:
    return argv[argv.index("--out") + 1] if "--out" in argv else None


def readme_commands() -> list[ReadmeCommand]:
    """Every `rdasim` line of the README's sh blocks after the set-up."""
    body = README.split("## Quick start", 1)[1]
    found = []
    for b, block in enumerate(re.findall(r"```sh\n(.*?)```", body, re.S)):
        lines = [line.strip() for line in block.splitlines() if line.strip().startswith("rdasim ")]
        for i, line in enumerate(lines):
            argv = shlex.split(line, comments=True)
            needs = tuple(e for e in lines[:i]
                          if (out := _out_dir(shlex.split(e, comments=True))) and out in argv[1:])
            found.append(ReadmeCommand(line, b, needs))
    return found


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    return subprocess.run([sys.executable, "-m", "cluster.cli", *argv[1:]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = _setup_commands()
    assert len(commands) == 2
    assert "rdasim" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci


def test_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= MAX_LINES


def test_readme_has_a_command_of_every_command():
    from cluster.cli import SUBCOMMANDS

    used = {c.argv[1] for c in readme_commands()}
    assert used == set(SUBCOMMANDS)


def test_every_slow_command_is_in_the_readme():
    assert SLOW <= {_bare(c.line) for c in readme_commands()}


@pytest.fixture(scope="module")
def block_dirs(tmp_path_factory) -> dict[int, Path]:
    return {}


@pytest.mark.parametrize("command", [pytest.param(c, id=c.line.split("#")[0].strip(),
                                                  marks=[pytest.mark.slow] if c.slow else [])
                                     for c in readme_commands()])
def test_readme_command_runs_as_stated(command: ReadmeCommand, block_dirs, tmp_path_factory):
    """Run from a directory of its own (its block's), where examples/ and tests/ are the
    repository's, so relative outputs stay out of the checkout."""
    if command.block not in block_dirs:
        d = tmp_path_factory.mktemp(f"readme{command.block}")
        for name in ("examples", "tests"):
            (d / name).symlink_to(ROOT / name)
        block_dirs[command.block] = d
    cwd = block_dirs[command.block]
    for need in command.needs:  # when run alone (-k), make what it reads first
        argv = shlex.split(need, comments=True)
        if not (cwd / _out_dir(argv)).exists():
            assert _run(argv, cwd).returncode == 0, need
    p = _run(command.argv, cwd)
    assert p.returncode == command.status, f"{command.line}\nexit {p.returncode}\n{p.stderr[-3000:]}"
    if "--json" in command.argv:
        assert isinstance(json.loads(p.stdout), dict)
    if (out := _out_dir(command.argv)) is not None:
        assert list((cwd / out).rglob("*.parquet")), f"{command.line} wrote no Parquet file under {out}"

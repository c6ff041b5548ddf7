"""The README's promises: two set-up commands, CI runs the test one."""

import re

from tests.paths import ROOT

README = (ROOT / "README.md").read_text()


def _setup_commands() -> list[str]:
    section = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = _setup_commands()
    assert len(commands) == 2
    assert "rdasim" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert commands[1] in ci

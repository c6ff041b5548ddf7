"""The test command lints and type-checks: ``ruff check .`` and ``mypy``, configured in
pyproject.toml ([tool.ruff], [tool.mypy]: strict on the Protocol and registry modules), report nothing.

Both run from the repository root as the CI would; a finding fails the test with the tool's own
output. mypy keeps its cache in .mypy_cache, so a rerun checks only what changed.
"""

import subprocess
import sys

import pytest

from tests.paths import ROOT


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    got = subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    if "No module named" in got.stderr:
        pytest.fail(f"{tool} is not installed: pip install -e '.[test]' installs it")
    return got


def test_ruff_reports_nothing():
    got = _run("ruff", "check", ".", "--output-format", "concise", "--no-fix")
    assert got.returncode == 0, f"ruff check . found:\n{got.stdout}{got.stderr}"


def test_mypy_reports_nothing():
    got = _run("mypy")
    # clean is one line, "Success: no issues found in N source files"; notes (e.g. an annotation
    # in an unannotated function, which mypy does not check) count as findings too
    findings = [line for line in got.stdout.splitlines() if line and not line.startswith("Success:")]
    assert got.returncode == 0 and not findings, f"mypy found:\n{got.stdout}{got.stderr}"

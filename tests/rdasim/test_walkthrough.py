"""docs/api.md is a notebook: every python cell runs, top to bottom, in one namespace, from a
directory where examples/ is the repository's (so what it writes stays out of the checkout)."""

from __future__ import annotations

import os
import re

import pytest

from tests.paths import ROOT

API = ROOT / "docs" / "api.md"


def cells() -> list[str]:
    return re.findall(r"```python\n(.*?)```", API.read_text(), re.S)


def test_the_walkthrough_has_a_cell_for_every_function_of_the_api():
    import rdasim

    code = "\n".join(cells())
    assert all(f"rdasim.{name}(" in code for name in ("run", "noc", "map", "sweep", "explore", "read"))
    assert set(rdasim.__all__) >= {"run", "noc", "map", "sweep", "explore", "read", "ConfigError", "Result"}


@pytest.mark.ray
def test_every_cell_of_the_api_walkthrough_runs_in_order(tmp_path, ray_session, capsys):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    here = os.getcwd()
    os.chdir(tmp_path)
    namespace: dict = {}
    try:
        for i, cell in enumerate(cells()):
            try:
                exec(compile(cell, f"docs/api.md cell {i + 1}", "exec"), namespace)
            except Exception as exc:  # noqa: BLE001 - name the cell that failed
                pytest.fail(f"docs/api.md cell {i + 1} raised {type(exc).__name__}: {exc}\n{cell}")
    finally:
        os.chdir(here)
    printed = capsys.readouterr().out
    shown = re.search(r"prints\n\n```\n(.*?)```", API.read_text(), re.S).group(1)  # the error the page shows
    assert shown in printed

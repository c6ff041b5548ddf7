"""A bad explore spec is exit 2 with one line naming what is wrong, before anything runs."""

import textwrap

import pytest

from cluster.cli import main

BASE = """
[chip]
preset = "plasticine"
rows = 4
cols = 4
[memory]
policy = "virtual"
[workload]
kind = "kv-decode"
"""

GOOD = """
[explore]
budget = 4
[explore.space]
"memory.block_bytes" = { type = "ordinal", values = ["1KiB", "4KiB"], when = { "memory.policy" = "virtual" } }
"memory.policy" = { type = "categorical", values = ["virtual", "static-multi"] }
[[explore.objectives]]
metric = "tokens_per_second"
direction = "maximize"
[[explore.constraints]]
expr = "chip.mu_bytes * chip.rows * chip.cols <= 64MiB"
"""


def _spec(tmp_path, text: str):
    (tmp_path / "base.toml").write_text(BASE)
    path = tmp_path / "spec.toml"
    path.write_text('base = "base.toml"\n' + textwrap.dedent(text))
    return path


def _fails(tmp_path, capsys, text: str, *flags: str) -> str:
    spec = _spec(tmp_path, text)
    assert main(["explore", str(spec), "--out", str(tmp_path / "out"), "--in-process", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert not (tmp_path / "out" / "trials").exists()  # nothing ran
    return err


def test_a_good_spec_is_read_with_its_condition_ordered_after_its_parent(tmp_path):
    from cluster.explore.spec import read_explore

    spec = read_explore(_spec(tmp_path, GOOD))
    assert spec.space.keys == ["memory.policy", "memory.block_bytes"]
    assert spec.optimizer == "tpe" and spec.budget == 4
    assert spec.constraints[0].on_config and spec.space.size() == 3  # virtual x 2 block sizes, static-multi


@pytest.mark.parametrize("change, expected", [
    (("[explore]", "[explore]\noptimiser = \"tpe\""),
     "explore.optimiser: unknown key; did you mean 'explore.optimizer'?"),
    (("\"memory.block_bytes\"", "\"memory.blok_bytes\""), "memory.blok_bytes: not a config key"),
    (('metric = "tokens_per_second"', 'metric = "tokens_per_sec"'), "is not a metric of run_summary"),
    (('metric = "tokens_per_second"', 'metric = "workload"'), "is not a metric of run_summary"),  # a string column
    (("<= 64MiB", "<= = 64MiB"), "explore.constraints[0].expr: cannot parse"),
    (("<= 64MiB", "<= __import__('os')"), "is not allowed"),
    (("budget = 4", "budget = 0"), "explore.budget: must be at least 1 trial"),
    (('when = { "memory.policy" = "virtual" }', 'when = { "memory.placement" = "spread" }'),
     "'memory.placement' is not a key of the space"),
    (('values = ["virtual", "static-multi"]', 'values = ["virtual", "virtul"]'), "value 'virtul'"),
    (('"memory.policy" = { type = "categorical"', '"memory.policy" = { type = "enum"'), "is not one of int, real"),
    (("budget = 4", "budget = 4\noptimizer = \"cmaes\""), "'cmaes' is not one of"),
])
def test_each_bad_spec_is_one_line(tmp_path, capsys, change, expected):
    old, new = change
    assert old in GOOD
    err = _fails(tmp_path, capsys, GOOD.replace(old, new, 1))
    assert err.startswith("error: ") and expected in err


def test_an_empty_space_and_missing_objectives(tmp_path, capsys):
    err = _fails(tmp_path, capsys, "[explore]\n[explore.space]\n[[explore.objectives]]\nmetric = \"tokens\"\n")
    assert "explore.space: is empty" in err
    err = _fails(tmp_path, capsys, '[explore.space]\n"run.seed" = { type = "int", low = 1, high = 3 }\n')
    assert "explore.objectives: is required" in err


def test_a_budget_flag_below_one_is_refused(tmp_path, capsys):
    assert "--budget must be at least 1" in _fails(tmp_path, capsys, GOOD, "--budget", "0")


def test_several_problems_are_listed_together(tmp_path, capsys):
    spec = _spec(tmp_path, GOOD.replace("budget = 4", "budget = -1").replace("<= 64MiB", "<="))
    assert main(["explore", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "2 problems" in err and "explore.budget" in err and "explore.constraints[0].expr" in err

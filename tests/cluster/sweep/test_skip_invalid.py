"""No experimental-design traps: an axis may cross values that are invalid together
(skip_invalid), and seeds swept over a trace replay are warned about."""

import textwrap

import pytest

from cluster.cli import main
from cluster.config import ConfigError
from cluster.sweep.plan import plan_sweep
from tests.paths import EXAMPLES

HEAD = f'base = "{EXAMPLES / "kv_decode_trace.toml"}"\n[sweep]\nname = "s"\ncommand = "run"\n'
CROSSED = """
[axes]
memory.policy = ["virtual", "static-single", "static-multi"]
memory.spill = ["none", "nearest"]
"""


def _spec(tmp_path, body, skip=True):
    spec = tmp_path / "s.toml"
    spec.write_text(HEAD + ("skip_invalid = true\n" if skip else "") + textwrap.dedent(body))
    return spec


def test_combinations_invalid_together_are_skipped_with_one_line_saying_how_many_and_why(tmp_path):
    plan = plan_sweep(_spec(tmp_path, CROSSED))
    got = {(p.config["memory"]["policy"], p.config["memory"]["spill"]) for p in plan.points}
    assert got == {("virtual", "none"), ("virtual", "nearest"), ("static-single", "none"), ("static-multi", "none")}
    (line,) = [n for n in plan.notes if "skipped" in n]
    assert line.startswith("2 of 6 combinations skipped as invalid together (sweep.skip_invalid): ")
    assert "memory.spill: nearest needs memory.policy = virtual (not static-single) (1)" in line
    with pytest.raises(ConfigError, match="nearest needs memory.policy = virtual"):  # without it: an error
        plan_sweep(_spec(tmp_path, CROSSED, skip=False))


def test_a_value_invalid_in_every_combination_is_still_an_error(tmp_path):
    with pytest.raises(ConfigError, match="invalid in every combination it is in"):
        plan_sweep(_spec(tmp_path, CROSSED.replace('"nearest"]', '"nearest"]\nmemory.block_bytes = [4096, 3]')))
    with pytest.raises(ConfigError, match="every combination is invalid"):
        plan_sweep(_spec(tmp_path, '[axes]\nmemory.policy = ["static-single"]\nmemory.spill = ["nearest"]\n'))


def test_explicit_points_are_never_skipped(tmp_path):
    body = '[[points]]\n"memory.policy" = "static-single"\n"memory.spill" = "nearest"\n'
    with pytest.raises(ConfigError, match="nearest needs memory.policy"):
        plan_sweep(_spec(tmp_path, body))


def test_the_dry_run_says_what_it_skipped(tmp_path, capsys):
    assert main(["sweep", str(_spec(tmp_path, CROSSED)), "--dry-run"]) == 0
    got = capsys.readouterr()
    assert len(got.out.splitlines()) == 4 and "2 of 6 combinations skipped" in got.err


def test_seeds_swept_over_a_trace_replay_are_warned_about(tmp_path):
    plan = plan_sweep(_spec(tmp_path, "[axes]\nrun.seed = [1, 2]\n", skip=False))
    (warning,) = plan.notes
    assert warning.startswith("warning: run.seed takes 2 values but workload.decode.trace replays a trace")
    assert "only changes what the trace does not fix" in warning
    drawn = tmp_path / "drawn.toml"  # the same seeds without a trace: arrivals are drawn from them, no warning
    drawn.write_text(f'base = "{EXAMPLES / "kv_decode.toml"}"\n[sweep]\nname = "d"\ncommand = "run"\n'
                     "[axes]\nrun.seed = [1, 2]\n")
    assert plan_sweep(drawn).notes == ()


def test_the_policies_example_crosses_spill_and_skips_the_static_policies():
    plan = plan_sweep(EXAMPLES / "sweep_policies.toml")
    assert len(plan.points) == 60 and plan.skipped is not None and plan.skipped.count == 36
    assert all(p.config["memory"]["policy"] == "virtual" for p in plan.points
               if p.config["memory"]["spill"] == "nearest")

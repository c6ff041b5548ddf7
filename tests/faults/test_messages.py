"""Error messages that say what is wrong: a name that does not start with a letter, a command not listed,
routing ids out of range."""

from __future__ import annotations

import numpy as np

from tests.faults.conftest import ROOT, in_process, one_line_error


def _spec(tmp_path, name: str, command: str):
    p = tmp_path / "s.toml"
    p.write_text(f'[sweep]\nname = "{name}"\ncommand = "{command}"\n[axes]\n"noop.value" = [1]\n')
    return p


def test_a_sweep_name_of_a_dot_is_told_it_must_start_with_a_letter_or_digit(tmp_path):
    err = one_line_error(in_process("sweep", _spec(tmp_path, ".", "noop"), "--dry-run"))
    assert "sweep.name: '.' must start with a letter or digit" in err


def test_an_unknown_sweep_command_lists_every_command_a_spec_may_name(tmp_path):
    err = one_line_error(in_process("sweep", _spec(tmp_path, "s", "nop"), "--dry-run"))
    assert "'nop' is not one of noc, run, system, noop (" in err and "did you mean 'noop'?" in err


def test_routing_ids_past_the_experts_are_out_of_range_not_routed_twice(tmp_path):
    trace = tmp_path / "t.npz"
    np.savez(trace, experts=np.full((1, 2, 4, 2), 99))  # 8 experts in the example: ids 0..7
    example = ROOT / "examples" / "moe_trace.toml"
    err = one_line_error(in_process("run", example, "--set", f"workload.moe.trace={trace}"))
    assert "token 0: expert 99 is out of range (the run has 8 experts: ids 0..7)" in err
    assert "routed twice" not in err

"""Known constraints: parsed with ast, evaluated by a walker that knows a few node kinds and nothing else."""

import pytest

from cluster.explore.constraints import ConstraintError, parse_constraint

CONFIG = {"chip.mu_bytes": 64 * 1024, "chip.rows": 8, "chip.cols": 16, "memory.policy": "virtual"}


def test_sizes_keys_arithmetic_and_chained_comparisons():
    c = parse_constraint("chip.mu_bytes * chip.rows * chip.cols <= 8MiB")
    assert c.keys == ("chip.mu_bytes", "chip.rows", "chip.cols")
    assert c.holds(CONFIG.__getitem__)  # exactly 8 MiB
    assert not parse_constraint("chip.mu_bytes * chip.rows * chip.cols < 8MiB").holds(CONFIG.__getitem__)
    assert parse_constraint("1 < chip.rows <= 8 and memory.policy == 'virtual'").holds(CONFIG.__getitem__)
    assert not parse_constraint("not (chip.rows >= 8)").holds(CONFIG.__getitem__)
    assert parse_constraint("max(chip.rows, chip.cols) // 2 == 8 or chip.rows > 100").holds(CONFIG.__getitem__)
    assert parse_constraint("chip.mu_bytes <= 1.5KB * 100").holds(CONFIG.__getitem__)  # 150000 bytes


@pytest.mark.parametrize("text", [
    "__import__('os').system('true') == 0",  # a call of anything but min/max/abs
    "chip.rows.__class__ == 1 or ().__class__ == 1",  # attribute access on something not a dotted key
    "[x for x in (1, 2)] == 1",
    "lambda: 1",
    "chip.rows + 1",  # not a condition
    "chip.rows <=",  # not an expression
    "chip.rows in (1, 2)",  # membership is not among the comparisons
    "",
])
def test_anything_else_is_refused_before_it_can_run(text):
    with pytest.raises(ConstraintError):
        parse_constraint(text)

"""rdasim compare: two runs or two slices of one set of results metric by metric, B / A, known answers."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rdasim
from cluster.cli import main


def _runs(d, rows):
    d.mkdir()
    cols = {k: [r.get(k) for r in rows] for k in rows[0]}
    pq.write_table(pa.table(cols), d / "run_summary.parquet")
    return d


def _row(policy, ttft, tps, status="completed"):
    return {"memory_policy": policy, "status": status, "ttft_p99_seconds": ttft, "tokens_per_second": tps,
            "energy_joules": 2.0, "bytes_copied": 0}


def test_two_run_directories_metric_by_metric_with_the_ratio(tmp_path, capsys):
    a = _runs(tmp_path / "a", [_row("virtual", 0.2, 10.0), _row("virtual", 0.4, 14.0)])  # two seeds: their mean
    b = _runs(tmp_path / "b", [_row("static", 0.6, 6.0), _row("static", 9.0, 1.0, "deadlocked")])  # never a value
    got = rdasim.compare(a, b)
    lines = {ln.metric: (ln.a, ln.b, ln.ratio) for ln in got.lines}
    assert lines["ttft_p99_seconds"] == pytest.approx((0.3, 0.6, 2.0))
    assert lines["tokens_per_second"] == pytest.approx((12.0, 6.0, 0.5))
    assert lines["energy_joules"] == pytest.approx((2.0, 2.0, 1.0))
    assert "bytes_copied" not in lines  # 0 on both sides: nothing to say
    assert "mean of 2 runs" in got.a.label and "mean" not in got.b.label  # B's deadlocked run left out
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "fig")]) == 0
    out = capsys.readouterr()
    row = next(line for line in out.out.splitlines() if line.startswith("p99 TTFT"))
    assert row.split()[-1] == "2.000" and "300 ms" in row and "600 ms" in row
    assert (tmp_path / "fig" / "compare-a-vs-b.png").read_bytes()[:4] == b"\x89PNG"


def test_two_slices_of_one_directory(tmp_path, capsys):
    d = _runs(tmp_path / "r", [_row("virtual", 0.2, 10.0), _row("static-single", 0.5, 8.0)])
    assert main(["compare", str(d), "--where-a", "memory.policy=virtual", "--where-b", "memory.policy=static-single",
                 "--no-figure", "--metric", "ttft_p99_seconds"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("where memory_policy = virtual") and len(out) == 4 and out[3].split()[-1] == "2.500"


@pytest.mark.parametrize("argv, said", [
    (["--where-a", "memory.policy=none", "--where-b", "memory.policy=virtual"], "where memory_policy = none: no rows"),
    (["--where-a", "policy=virtual", "--where-b", "memory.policy=virtual"], "no column 'policy'"),
    (["--where-a", "memory.policy"], "expected AXIS=VALUE"),
    ([], "give DIR_B, or --where-a and --where-b"),
])
def test_a_side_that_selects_nothing_is_a_one_line_error(tmp_path, capsys, argv, said):
    d = _runs(tmp_path / "r", [_row("virtual", 0.2, 10.0)])
    assert main(["compare", str(d), *argv, "--no-figure"]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1

"""Bad input writes nothing, and every hint names a value that is accepted.

The cases are the ones a researcher hit: a config whose trace is missing, run with ``--out`` to a
new directory (exit 2, yet the directory was made); ``rdasim report`` of a directory without
results (exit 2, yet ``_figures`` was made in it); an empty item of a comma-separated list
(dropped, exit 0); a bare clock hinted as ``"1e+09GHz"``; a shard count no cut makes, hinted with
cuts that could not make it either. Each hint here is applied and must work.
"""

from __future__ import annotations

import json
import re

import pytest

from cluster.cli import main
from tests.paths import EXAMPLES

NOC_QUICK = ["--set", "noc.warmup_cycles=100", "--set", "noc.measure_cycles=200", "--quiet"]


def _tree(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_config_error_with_out_makes_no_directory(tmp_path, capsys):
    cfg = tmp_path / "missing_trace.toml"
    text = (EXAMPLES / "kv_decode_trace.toml").read_text()
    cfg.write_text(re.sub(r'(?m)^trace = ".*"', 'trace = "no_such_trace.csv"', text))
    before = _tree(tmp_path)
    assert main(["run", str(cfg), "--out", str(tmp_path / "x" / "b4"), "--quiet"]) == 2
    assert "no_such_trace.csv" in capsys.readouterr().err
    assert _tree(tmp_path) == before  # neither x/ nor x/b4/


def test_report_of_a_directory_without_results_writes_nothing_in_it(tmp_path, capsys):
    empty = tmp_path / "emptydir"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "no rdasim results" in capsys.readouterr().err
    assert _tree(empty) == []  # no _figures/


@pytest.mark.parametrize("rates,which", [("0.1,,0.3", "item 2 of 3 is empty"), ("0.1,", "item 2 of 2 is empty"),
                                         (",0.2,", "items 1, 3 of 3 are empty")])
def test_an_empty_list_item_is_an_error(rates, which, tmp_path, capsys):
    assert main(["noc", "--rates", rates, "--k", "4", "--out", str(tmp_path / "noc"), *NOC_QUICK]) == 2
    err = capsys.readouterr().err
    assert which in err and "Traceback" not in err
    assert _tree(tmp_path) == []


def test_a_bare_clock_is_hinted_as_a_value_that_loads_and_means_it(capsys):
    kv = str(EXAMPLES / "kv_decode.toml")
    assert main(["run", kv, "--set", "chip.clock=1000000000"]) == 2
    err = capsys.readouterr().err
    hint = re.search(r'in Hz that is "([^"]+)"', err).group(1)
    assert hint == "1GHz"
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA

    assert load(RUN_SCHEMA, kv, [f"chip.clock={hint}"])["chip"]["clock"] == 1e9


def _shard_hints(err: str) -> list[tuple[int, str]]:
    """(shards, cut) pairs a cut error proposes."""
    counted = re.findall(r'(\d+) \(run\.cut = "(\w+)"\)', err)
    if counted:
        return [(int(n), c) for n, c in counted]
    m = re.search(r'run\.cut = "(\w+)" makes (\d+)', err)
    return [(int(m.group(2)), m.group(1))]


@pytest.mark.parametrize("argv,words", [
    (["--shards", "64"], "no cut makes 64 of a 4x4 grid; at most 16"),  # the case
    (["--shards", "8"], 'run.cut = "blocks" makes 8'),
    (["--shards", "7", "--cut", "blocks"], "no cut makes 7 of a 4x4 grid; 6"),
    (["--shards", "5", "--cut", "cols"], "no cut makes 5"),
])
def test_a_shard_count_no_cut_makes_is_hinted_with_cuts_that_work(argv, words, capsys):
    assert main(["noc", "--k", "4", "--rate", "0.1", *argv, *NOC_QUICK]) == 2
    err = capsys.readouterr().err
    assert words in err
    hints = _shard_hints(err)
    assert hints
    for shards, cut in hints:  # every proposal runs
        assert main(["noc", "--k", "4", "--rate", "0.1", "--shards", str(shards), "--cut", cut, "--json",
                     *NOC_QUICK]) == 0
        assert json.loads(capsys.readouterr().out)["shards"] == shards

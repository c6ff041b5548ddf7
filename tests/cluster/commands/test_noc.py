"""The rdasim noc command line: JSON output, Parquet tables, and exit status 2 on bad input."""

import json

import pytest

from cluster.cli import main
from cluster.results.reading import read_table

QUICK = ["--k", "4", "--set", "noc.warmup_cycles=200", "--set", "noc.measure_cycles=500", "--quiet"]


def test_json_line_per_rate_and_parquet_tables(tmp_path, capsys):
    assert main(["noc", "--rates", "0.1,0.3", "--json", "--out", str(tmp_path), *QUICK]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["rate"] for x in lines] == [0.1, 0.3]
    for key in ("avg_latency", "p50_latency", "p99_latency", "offered", "accepted", "avg_hops",
                "sim_cycles", "epochs", "wall_seconds", "result_hash"):
        assert key in lines[0]
    summary = read_table(tmp_path, "noc_summary")
    links = read_table(tmp_path, "noc_links")
    assert summary.num_rows == 2 and set(summary.column("result_hash").to_pylist()) == {x["result_hash"] for x in lines}
    assert links.num_rows == 2 * 4 * 4 * 3  # directed links of a 4x4 mesh, per rate
    for col in ("run_id", "config_hash", "seed", "rdasim_version"):
        assert col in summary.column_names and col in links.column_names
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary files left behind


def test_config_file_and_flags_agree(tmp_path, capsys):
    cfg = tmp_path / "n.toml"
    cfg.write_text("[noc]\nk = 4\nrate = 0.2\nwarmup_cycles = 200\nmeasure_cycles = 500\n")
    main(["noc", str(cfg), "--json", "--quiet"])
    a = json.loads(capsys.readouterr().out)
    main(["noc", "--rate", "0.2", "--json", *QUICK])
    b = json.loads(capsys.readouterr().out)
    assert a["result_hash"] == b["result_hash"]


@pytest.mark.parametrize("argv,needle", [
    (["noc", "--topology", "tourus"], "did you mean 'torus'"),
    (["noc", "--k", "0"], "noc.k: 0 is below the minimum 1"),
    (["noc", "--rate", "0.3", "--k", "4", "--shards", "2", "--epoch", "9"], "longer than the lookahead of link"),
    (["noc", "--shards", "9", "--k", "4"], "cannot cut 4 rows into 9"),
    (["noc", "--rates", "0.1,x"], "expected comma-separated numbers"),
    (["noc", "/nonexistent.toml"], "does not exist"),
    (["noc", "--traffic", "transpose", "--rows", "4", "--cols", "8"], "square grid"),
    (["noc", "--backend", "local", "--address", "auto"], "only makes sense"),
    (["noc", "--shards", "two"], "expected a whole number or auto"),
    (["noc", "--set", "run.shards=many"], 'expected a whole number or "auto"'),
])
def test_bad_input_exits_2_with_a_clear_message(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_bad_toml_file(tmp_path, capsys):
    bad = tmp_path / "b.toml"
    bad.write_text("[noc\nk = 4")
    assert main(["noc", str(bad)]) == 2
    assert "not valid TOML" in capsys.readouterr().err


def test_interrupted_write_leaves_no_file(tmp_path):
    from cluster.results import io

    target = tmp_path / "x.json"
    with pytest.raises(RuntimeError):
        with io.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not target.exists() and not list(tmp_path.iterdir())

"""The rdasim run command line: JSON figures, Parquet tables, trace, memory map, bad input."""

import json

import pytest

from cluster.cli import main
from cluster.config import load
from cluster.config.run import RUN_SCHEMA, chip_config
from cluster.results.reading import read_table
from tests.paths import EXAMPLES

SMALL = ["--set", "chip.rows=4", "--set", "chip.cols=8", "--quiet"]
KV = ["--set", "workload.decode.requests=3", "--set", "workload.decode.max_batch=3",
      "--set", "workload.decode.prompt_tokens.min=16", "--set", "workload.decode.prompt_tokens.max=40",
      "--set", "workload.decode.output_tokens.min=2",
      "--set", "workload.decode.output_tokens.max=3"]
ISSUE_KEYS = ("sim_cycles", "wall_seconds", "tokens_per_second", "peak_mu_utilization", "bytes_copied", "messages",
              "sync_wait_cycles", "use_after_free", "double_free", "leaks", "oom_events", "result_hash")


def _json(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_figures_the_issue_names_and_shards_agree(capsys):
    a = _json(["run", str(EXAMPLES / "race.toml"), "--json", "--network", "packet"], capsys)
    for k in ISSUE_KEYS:
        assert k in a
    assert a["use_after_free"] > 0 and a["messages"]["ref_inc"] == 4
    b = _json(["run", str(EXAMPLES / "race.toml"), "--json", "--network", "packet", "--shards", "3",
               "--set", "run.cut=blocks"], capsys)
    assert b["result_hash"] == a["result_hash"] and b["shards"] == 3


def test_tables_trace_and_memory_map(tmp_path, capsys):
    trace = tmp_path / "t.json"
    argv = ["run", str(EXAMPLES / "kv_decode.toml"), *SMALL, *KV, "--out", str(tmp_path / "o"), "--trace",
            str(trace), "--memory-map", "1500", "--json"]
    s = _json(argv, capsys)
    out = tmp_path / "o"
    summary = read_table(out, "run_summary")
    assert summary.num_rows == 1 and summary.column("result_hash")[0].as_py() == s["result_hash"]
    for name in ("run_mu_series", "run_buffers", "run_links"):
        t = read_table(out, name)
        assert t.num_rows > 0 and {"run_id", "config_hash", "seed", "rdasim_version"} <= set(t.column_names)
    links = read_table(out, "run_links").to_pydict()
    assert len(links["flits"]) == 2 * (4 * 7 + 3 * 8)  # directed links of a 4 x 8 mesh
    assert sum(links["flits"]) > 0
    buffers = read_table(out, "run_buffers").to_pydict()
    assert len(buffers["alloc"]) == 3 * 2 * 2 * 2 and min(buffers["freed"]) > 0
    ev = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert any(n.startswith("CU (") for n in names) and any(n.startswith("MU (") for n in names)
    kinds = {e["name"] for e in ev if e["ph"] in ("i", "X")}
    assert {"allocate", "free", "compute", "wait memory"} <= kinds
    assert all({"ph", "ts", "pid", "tid"} <= set(e) for e in ev if e["ph"] != "M")
    text = (out / "memory_map_1500.txt").read_text()
    assert text.startswith("Memory map at cycle 1500 (policy virtual") and text.count("MU (") == 16
    assert "buffer" in text and not list(tmp_path.rglob(".*.tmp"))


def test_race_trace_shows_reference_operations_and_the_oracle(tmp_path, capsys):
    trace = tmp_path / "race.json"
    _json(["run", str(EXAMPLES / "race.toml"), "--json", "--network", "packet", "--trace", str(trace)], capsys)
    names = {e["name"] for e in json.loads(trace.read_text())["traceEvents"]}
    assert {"ref +1", "ref -1", "copy reference", "drop reference", "oracle: use after free",
            "oracle: double free", "used bytes"} <= names


def test_every_example_config_is_valid():
    mine = ["kv_decode", "spec_decode", "moe_mixtral", "moe_switch", "race"]
    for name in mine:
        cfg = chip_config(load(RUN_SCHEMA, EXAMPLES / f"{name}.toml"))
        assert cfg.workload.kind in name.replace("_", "-") or cfg.workload.kind == "moe"


@pytest.mark.parametrize("extra,needle", [
    (["--set", "memory.polcy=virtual"], "did you mean 'memory.policy'"),
    (["--set", "memory.policy=virtal"], "did you mean 'virtual'"),
    (["--set", "noc.model=flit"], "noc.model"),
    (["--set", "workload.race.producer=[5, 4]"], "workload.race.producer: tile [5, 4] holds a memory unit"),
    (["--set", "workload.race.memory=[40, 4]"], "outside the 8x16 grid"),
    (["--set", "memory.weight_bits=1", "--set", "memory.reclaim=partial-free"], "memory.weight_bits"),
    (["--set", "memory.block_bytes=100"], "not a multiple of 64"),
    (["--shards", "9", "--set", "chip.rows=8"], "cannot cut 8 rows into 9"),
    (["--memory-map", "-1"], "cannot be negative"),
])
def test_bad_input_exits_2_with_a_clear_message(extra, needle, capsys):
    assert main(["run", str(EXAMPLES / "race.toml"), *extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_batch_larger_than_the_chip_is_a_config_error(capsys):
    assert main(["run", str(EXAMPLES / "kv_decode.toml"), *SMALL, "--set", "workload.decode.max_batch=40"]) == 2
    assert "workload.decode.max_batch: 40 sequences need that many worker CUs" in capsys.readouterr().err


def test_missing_file(capsys):
    assert main(["run", "/nonexistent/x.toml"]) == 2
    assert "does not exist" in capsys.readouterr().err

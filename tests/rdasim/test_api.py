"""The Python API against the command line it stands beside: the same config from every way of
writing it, the same result, errors naming every problem by the key or keyword that gave it,
and a record whose identity its tables and run.json repeat."""

from __future__ import annotations

import json

import pytest

import rdasim
from cluster.cli import main
from cluster.config import load, short
from cluster.config.run import RUN_SCHEMA
from cluster.config.source import load_config
from tests.paths import EXAMPLES

RACE = EXAMPLES / "race.toml"


def test_every_spelling_of_an_override_resolves_to_what_set_resolves_to():
    want = load(RUN_SCHEMA, RACE, ["memory.reclaim=partial-free", "run.shards=2", "noc.model=packet"])
    spellings = [
        ({"memory.reclaim": "partial-free", "run.shards": 2, "noc.model": "packet"}, {}),
        (None, {"memory__reclaim": "partial-free", "run__shards": 2, "noc__model": "packet"}),
        (None, {"memory": {"reclaim": "partial-free"}, "shards": 2, "network": "packet"}),  # a table, short names
        ({"memory.reclaim": "refcount"}, {"memory__reclaim": "partial-free", "shards": 2, "network": "packet"}),
    ]
    for overrides, keywords in spellings:
        assert load_config(RUN_SCHEMA, RACE, overrides, keywords, short.CHIP) == want


def test_a_config_as_a_file_as_text_and_as_a_dict_is_one_config(tmp_path):
    text = RACE.read_text()
    as_file = load_config(RUN_SCHEMA, RACE, None, {}, short.CHIP)
    as_text = load_config(RUN_SCHEMA, text, None, {}, short.CHIP)
    import tomllib

    as_dict = load_config(RUN_SCHEMA, tomllib.loads(text), None, {}, short.CHIP)
    assert as_file == as_text == as_dict


def test_a_file_s_trace_is_taken_from_its_directory_and_text_s_from_the_working_directory(monkeypatch):
    cfg = EXAMPLES / "kv_decode_trace.toml"  # trace = "traces/azure_code_sample.csv", beside the file
    from_file = load_config(RUN_SCHEMA, cfg, None, {}, short.CHIP)["workload"]["decode"]["trace"]
    assert from_file == str(EXAMPLES / "traces" / "azure_code_sample.csv")
    monkeypatch.chdir(EXAMPLES)
    from_text = load_config(RUN_SCHEMA, cfg.read_text(), None, {}, short.CHIP)["workload"]["decode"]["trace"]
    assert from_text == "traces/azure_code_sample.csv"  # as written: the working directory's


def test_a_bad_config_lists_every_problem_by_the_keyword_or_key_that_gave_it():
    with pytest.raises(rdasim.ConfigError) as err:
        rdasim.run(RACE, {"memory.reclaim": "refcnt"}, shards=0, noc__vcs=0, chip__bogus=1, progress=False)
    text = str(err.value)
    assert text.startswith("the overrides: 4 problems in the config")
    for given in ("memory.reclaim='refcnt'", "shards=0", "noc__vcs=0", "chip__bogus=1"):
        assert sum(line.strip().startswith(given) for line in text.splitlines()) == 1, (given, text)
    assert "command line" not in text
    with pytest.raises(rdasim.ConfigError) as err:  # a problem of the file and one of an override
        rdasim.run({"workload": {"kind": "race"}, "memory": {"policy": "virtul"}}, seed=-1, progress=False)
    assert str(err.value).startswith("the config dict and the overrides: 2 problems")
    assert "memory.policy: 'virtul'" in str(err.value) and "seed=-1" in str(err.value)


def test_text_that_is_not_toml_and_a_config_of_another_type_are_named():
    with pytest.raises(rdasim.UserError, match="the config text: not valid TOML"):
        rdasim.run("[chip\npreset = 1", progress=False)
    with pytest.raises(rdasim.UserError, match="does not exist"):
        rdasim.run("no_such.toml", progress=False)
    with pytest.raises(TypeError, match="a path, TOML text or a dict"):
        rdasim.run(42, progress=False)


def test_the_api_s_result_is_the_command_line_s(tmp_path, capsys):
    assert main(["run", str(RACE), "--json", "--quiet"]) == 0
    cli = json.loads(capsys.readouterr().out)
    r = rdasim.run(RACE, progress=False)
    assert r.status == cli["status"] == "completed" and r.exit_status == 0
    assert r.summary["result_hash"] == cli["result_hash"] and r.summary["use_after_free"] == cli["use_after_free"] > 0


def test_every_row_and_run_json_carry_the_summary_s_identity(tmp_path):
    r = rdasim.run(RACE, progress=False)
    s = r.summary
    for name, table in r.tables.items():
        assert set(table["run_id"].to_pylist()) == {s.run_id}, name
        assert set(table["config_hash"].to_pylist()) == {s.config_hash}, name
        assert set(table["rdasim_commit"].to_pylist()) == {s.code.commit}, name
    files = r.write(tmp_path / "out")
    assert files[-1].name == "run.json"  # last: its presence says the rest is there
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (record["run_id"], record["config_hash"], record["status"]) == (s.run_id, s.config_hash, "completed")
    assert record["rdasim_commit"] == s.code.commit and record["summary"]["result_hash"] == s["result_hash"]
    assert {f.name for f in files} >= {"action_counts.yaml", "ERT.yaml"}
    with pytest.raises(rdasim.UserError, match="holds another run's tables"):
        r.write(tmp_path / "out")
    with pytest.raises(rdasim.UserError, match="one of refuse, add, replace"):
        r.write(tmp_path / "out", existing="overwrite")  # not taken for "refuse"
    with pytest.raises(rdasim.UserError, match="one of refuse, add, replace"):
        rdasim.sweep('[sweep]\nname = "s"\ncommand = "noc"\n[axes]\n"noc.rate" = [0.1]\n', out=tmp_path / "s",
                     existing="overwrite", in_process=True, progress=False)


def test_a_system_run_json_records_the_commit_and_dirty_flag(tmp_path):
    """Before, a system run's run.json had rdasim_version alone."""
    from cluster.version import code_version

    r = rdasim.run(EXAMPLES / "system_tp_ring.toml", progress=False)
    assert r.summary.command == "system" and "system_summary" in r.tables
    r.write(tmp_path)
    record = json.loads((tmp_path / "run.json").read_text())
    v = code_version()
    assert (record["rdasim_commit"], record["rdasim_dirty"], record["rdasim_version"]) == (v.commit, v.dirty,
                                                                                         v.version)


def test_trace_and_memory_map_are_side_files_a_write_puts_beside_the_tables(tmp_path):
    r = rdasim.run(RACE, trace=True, memory_map=100, progress=False)
    assert json.loads(r.files["trace.json"])["traceEvents"]
    assert "memory_map_100.txt" in r.files and isinstance(r.files["memory_map_100.json"], dict)
    names = {p.name for p in r.write(tmp_path)}
    assert {"trace.json", "memory_map_100.txt", "memory_map_100.json", "run.json"} <= names
    with pytest.raises(rdasim.UserError, match="cannot be negative"):
        rdasim.run(RACE, memory_map=-3, progress=False)
    with pytest.raises(rdasim.UserError, match="a \\[system\\] of chips records neither"):  # not silently nothing
        rdasim.run(EXAMPLES / "system_tp_ring.toml", trace=True, progress=False)


def test_read_names_an_unknown_table_and_gives_a_known_one_nothing_wrote_empty(tmp_path):
    with pytest.raises(rdasim.UserError, match="did you mean 'run_summary'"):
        rdasim.read(tmp_path, "run_sumary")
    with pytest.raises(rdasim.UserError, match="not a directory"):
        rdasim.read(tmp_path / "nowhere", "run_summary")
    empty = rdasim.read(tmp_path, "noc_summary")
    assert empty.num_rows == 0 and "avg_latency" in empty.column_names


def test_a_mapping_is_the_command_line_s_and_its_plan_json_a_side_file(tmp_path, capsys):
    assert main(["map", "--preset", "fft-fp32-256-a100", "--json", "--quiet"]) == 0
    cli = json.loads(capsys.readouterr().out)
    m = rdasim.map(preset="fft-fp32-256-a100", progress=False)
    assert {k: v for k, v in m.summary.items() if k != "solver_seconds"} == {
        k: v for k, v in cli.items() if k != "solver_seconds"}
    assert m.status == cli["status"] == "optimal" and m.exit_status == 0
    names = {p.name for p in m.write(tmp_path)}
    assert {"plan.json", "run.json"} <= names and m.files["plan.json"]["plan"]["tp"] == m.summary["tp"]

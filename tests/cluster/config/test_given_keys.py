"""Keys the chosen workload does not read are refused, not ignored, and a problem a --set made is
named by that --set, not by the file."""

import glob
import tomllib

import pytest

from cluster.cli import main
from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA
from cluster.sweep.points import expand
from cluster.sweep.spec import parse_spec
from sim.workloads import WORKLOADS

DECODE = "the race workload does not read [workload.decode] (read by kv-decode, spec-decode)"
DECODE_TRACE = "the race workload does not read [workload.decode] (read by kv-decode, serve, serve-system, spec-decode)"


def _problems(*args, **kwargs) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(RUN_SCHEMA, *args, **kwargs)
    return err.value.details


def test_a_decode_trace_on_the_race_workload_exits_2_naming_who_reads_it(capsys):
    assert main(["run", "examples/race.toml", "--set", "workload.decode.trace=t.csv", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: the command line: 1 problem in the config\n"
                   f"  --set workload.decode.trace=t.csv: {DECODE_TRACE}\n")


def test_the_readers_are_the_registry_s():
    # by hand from sim/workloads: kv-decode, spec-decode, serve and serve-system share [workload.decode]; moe
    # reads [workload.moe]; the message follows each workload's SECTION and KEYS
    readers = {n for n, c in WORKLOADS.items() if c.SECTION == "decode" and "trace" in c.KEYS.fields}
    assert readers == {"kv-decode", "serve", "serve-system", "spec-decode"}
    assert _problems("examples/race.toml", ["workload.moe.experts=4"]) == [
        "--set workload.moe.experts=4: the race workload does not read [workload.moe] (read by moe)"]
    # a key inside a table: each key given is named, not the table
    assert _problems(raw={"workload": {"kind": "moe", "decode": {"prompt_tokens": {"min": 8, "max": 16}}}}) == [
        f"workload.decode.prompt_tokens.{k}: the moe workload does not read [workload.decode] "
        "(read by kv-decode, serve, serve-system, spec-decode)" for k in ("min", "max")]


def test_a_file_s_own_sections_are_checked_too(tmp_path):
    f = tmp_path / "race.toml"
    f.write_text('[workload]\nkind = "race"\n[workload.decode]\nmax_batch = 4\n')
    assert _problems(f) == [f"workload.decode.max_batch: {DECODE}"]
    # kind defaults to kv-decode: a [workload.moe] alone is not read either
    f.write_text("[workload.moe]\nexperts = 4\n")
    assert _problems(f) == ["workload.moe.experts: the kv-decode workload does not read [workload.moe] (read by moe)"]


def _run_configs() -> list[str]:
    """The examples that are `rdasim run` configs (not sweeps, `rdasim noc` or `rdasim map` ones)."""
    out = []
    for path in sorted(glob.glob("examples/*.toml")):
        raw = tomllib.load(open(path, "rb"))
        if {"chip", "system"} & set(raw) and raw.get("workload", {}).get("kind") in WORKLOADS:
            out.append(path)
    return out


@pytest.mark.parametrize("path", _run_configs())
def test_defaults_never_count_as_given(path):
    # every other section is filled with its defaults by the loader: none of them is refused
    cfg = load(RUN_SCHEMA, path)
    assert set(cfg["workload"]) > {"kind", "decode", "moe", "race"}  # defaults everywhere


def test_a_sweep_axis_the_workload_does_not_read_is_refused(tmp_path):
    spec, issues = parse_spec({"sweep": {"name": "x", "command": "run"}, "base": {"workload": {"kind": "race"}},
                               "axes": {"workload.decode.max_batch": [2, 4]}}, tmp_path)
    assert not issues
    points, found, _, _ = expand(spec, RUN_SCHEMA)
    assert not points and [str(i) for i in found] == [f"workload.decode.max_batch: {DECODE} (every point)"]


def test_a_set_problem_is_named_by_its_set_not_by_the_file(capsys):
    assert main(["run", "examples/kv_decode.toml", "--set", "workload.decode.max_batch=abc"]) == 2
    assert capsys.readouterr().err == ("error: the command line: 1 problem in the config\n"
                                       "  --set workload.decode.max_batch=abc: expected a whole number, got 'abc'\n")


def test_file_and_command_line_problems_each_say_where_they_are(tmp_path):
    f = tmp_path / "kv.toml"
    f.write_text("[workload.decode]\nheads = 0\nprompt_tokens = {min = 8, max = 16}\n")
    details = _problems(f, ["workload.decode.layers=0", "workload.decode.prompt_tokens={min=-1}"])
    assert details == [
        "--set workload.decode.layers=0: 0 is below the minimum 1",
        "workload.decode.heads: 0 is below the minimum 1",
        # --set gave the table: the key in it follows
        "--set workload.decode.prompt_tokens={min=-1}: workload.decode.prompt_tokens.min: -1 is below the minimum 1",
    ]
    with pytest.raises(ConfigError) as err:
        load(RUN_SCHEMA, f, ["workload.decode.layers=0", "workload.decode.prompt_tokens={min=-1}"])
    assert err.value.message == f"{f} and the command line: 3 problems in the config"
    with pytest.raises(ConfigError) as err:
        load(RUN_SCHEMA, f, ["workload.decode.layers=2", "workload.decode.prompt_tokens={min=8}"])
    assert err.value.message == f"{f}: 1 problem in the config"

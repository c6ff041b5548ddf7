"""Energy: components sum to the total, counts x table by hand, twice the work twice the joules."""

import math
from pathlib import Path

import pytest

from cluster.cli import main
from cluster.results.reading import read_table
from sim.energy.table import ACTIONS, COMPONENTS, DEFAULT_TABLE, EnergyTableError, load_table, parse_energy
from tests.paths import ROOT
from tests.sim.chip.chiprun import config, run

REALLOC = {"policy": "realloc-copy", "initial_bytes": "1KiB", "growth": 2.0}


def _kv(requests: int, memory: dict | None = None) -> dict:
    """Decode of fixed-length sequences, all arriving at once, three at a time."""
    return {"memory": memory or {"policy": "virtual"}, "workload": {"kind": "kv-decode", "decode": {
        "requests": requests, "max_batch": 3, "layers": 2, "heads": 1, "head_dim": 64, "dtype_bytes": 2,
        "prompt_tokens": {"dist": "fixed", "mean": 20}, "output_tokens": {"dist": "fixed", "mean": 8}}}}


def _table(tmp_path, **pj) -> Path:
    """A table pricing every action at 1 pJ except those given (component_action=pJ)."""
    lines = ['[table]\nname = "test"\ntechnology = "none"\n']
    for c, a in ACTIONS:
        lines.append(f'[{c}.{a}]\nenergy = "{pj.get(f"{c}_{a}", 1.0)}pJ"\nper = "x"\nnode = "x"\nsource = "test"\n')
    p = tmp_path / "t.toml"
    p.write_text("\n".join(lines))
    return p


@pytest.mark.parametrize("memory", [None, REALLOC])
def test_components_sum_to_the_total_and_twice_the_tokens_twice_the_energy(memory):
    done = run(_kv(3, memory))
    one, t1 = done.summary, done.tables
    two = run(_kv(6, memory)).summary
    for s in (one, two):
        parts = [s[f"energy_{c}_joules"] for c in COMPONENTS]
        assert math.fsum(parts) == pytest.approx(s["energy_joules"], rel=1e-12)
    assert math.fsum(t1["energy"]["joules"]) == pytest.approx(one["energy_joules"], rel=1e-12)
    assert math.fsum(t1["energy"]["share"]) == pytest.approx(1.0)
    # the second wave of three repeats the first: every component's energy doubles
    assert two["tokens"] == 2 * one["tokens"]
    assert two["energy_joules"] / one["energy_joules"] == pytest.approx(2.0, rel=0.01)
    assert two["energy_per_token_joules"] == pytest.approx(one["energy_per_token_joules"], rel=0.01)
    for c in COMPONENTS:
        assert two[f"energy_{c}_joules"] == pytest.approx(2 * one[f"energy_{c}_joules"], rel=0.01)


def test_counts_times_table_by_hand(tmp_path):
    """A table of 1 pJ per action except copies (1 nJ a byte) and link bits (2 pJ): the
    realloc-copy energy is the summary's bytes copied x 1 nJ, the link energy the links
    table's flits x flit bits x 2 pJ."""
    raw = _kv(3, REALLOC)
    raw["energy"] = {"table": str(_table(tmp_path, realloc_copy_byte=1000.0, noc_link_flit_bit=2.0))}
    done = run(raw)
    s, t = done.summary, done.tables
    assert s["energy_table"] == "test" and s["bytes_copied"] > 0
    assert s["energy_realloc_copy_joules"] == pytest.approx(s["bytes_copied"] * 1e-9, rel=1e-12)
    flit_bits = config(raw).spec.flit_bits
    assert s["energy_noc_link_joules"] == pytest.approx(sum(t["links"]["flits"]) * flit_bits * 2e-12, rel=1e-12)
    rows = dict(zip(zip(t["energy"]["component"], t["energy"]["action"]), t["energy"]["count"]))
    assert rows[("realloc_copy", "byte")] == s["bytes_copied"]
    # every other action costs 1 pJ: its joules are its count
    for c, a, n, j in zip(*(t["energy"][k] for k in ("component", "action", "count", "joules"))):
        if (c, a) not in (("realloc_copy", "byte"), ("noc_link", "flit_bit")):
            assert j == pytest.approx(n * 1e-12, rel=1e-12)


def test_virtual_copies_nothing_so_spends_nothing_on_copies():
    virt = run(_kv(3)).summary
    real = run(_kv(3, REALLOC)).summary
    assert virt["energy_realloc_copy_joules"] == 0 and real["energy_realloc_copy_joules"] > 0
    assert virt["energy_mu_joules"] > 0 and virt["energy_cu_joules"] > 0


def test_energies_need_their_units_and_tables_every_action(tmp_path):
    assert parse_energy("0.02nJ") == pytest.approx(20.0) and parse_energy("40 fJ") == pytest.approx(0.04)
    for bad in (1.5, "1.5", "1.5 pW", "-2pJ"):
        with pytest.raises(ValueError):
            parse_energy(bad)
    text = _table(tmp_path).read_text()
    (tmp_path / "bad.toml").write_text(text.replace("[mu.read_byte]", "[mu.read_bytes]"))
    with pytest.raises(EnergyTableError, match=r"unknown action mu.read_bytes \(did you mean 'read_byte'\?\).*"
                       r"missing: mu.read_byte"):
        load_table(tmp_path / "bad.toml")
    # the default table prices every action and cites a source for each
    assert {(e.component, e.action) for e in load_table(DEFAULT_TABLE).entries} == set(ACTIONS)
    assert all(e.source for e in load_table(None).entries)


def test_accelergy_counts_are_the_run_energy_counts(tmp_path, capsys):
    out = tmp_path / "out"
    short = ["--set", "workload.decode.requests=2", "--set", "workload.decode.max_prompt_tokens=64",
             "--set", "workload.decode.max_output_tokens=8"]
    assert main(["run", str(ROOT / "examples" / "kv_decode_trace.toml"), "--quiet", "--out", str(out), *short]) == 0

    energy = read_table(out, "run_energy").to_pydict()
    text = (out / "action_counts.yaml").read_text()
    assert text.startswith("action_counts:\n  version: '0.4'\n")
    for a, n in zip(energy["action"], energy["count"]):
        assert f"- name: {a}\n" in text and f"counts: {n}\n" in text
    _accelergy_prices_the_run(out)
    bad = tmp_path / "bad.toml"
    bad.write_text("[table]\nname = 1\n")
    assert main(["run", str(ROOT / "examples" / "kv_decode_trace.toml"), "--quiet",
                 "--set", f"energy.table={bad}"]) == 2
    assert "energy.table" in capsys.readouterr().err


def _accelergy_04_command_line():
    """Accelergy 0.4's command line as its parser declares it (accelergy/input_output.py,
    parse_commandline_args, at the 0.4 release): each flag and how many words it takes. Its
    default output, "all", includes the area tables, which need an architecture."""
    import argparse

    p = argparse.ArgumentParser(prog="accelergy", exit_on_error=False)
    p.add_argument("-o", "--outdir", default="./")
    p.add_argument("-e", "--extra_plugins", nargs="+", default=[])
    p.add_argument("-p", "--precision", type=int, default=6)
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("-f", "--output_files", nargs="*", default=["all"])
    p.add_argument("--oprefix", default="")
    p.add_argument("files", nargs="*")
    p.add_argument("--suppress_version_errors", action="store_true")
    p.add_argument("--update_config_version", action="store_true")
    p.add_argument("-l", "--list-components", action="store_true")
    return p


def test_the_documented_accelergy_command_is_one_accelergy_04_runs():
    """docs/run.md's command prices the run's two files and asks for the estimate alone (issue 27
    item 7): `accelergy ERT.yaml action_counts.yaml` asked for every output, and Accelergy 0.4 stopped
    with "Cannot get hierarchical architecture spec from raw inputs"."""
    import re
    import shlex

    from sim.energy.accelergy import accelergy_files
    from tests.paths import ROOT

    text = " ".join((ROOT / "docs" / "run.md").read_text().split())  # a span may wrap lines
    commands = re.findall(r"`(accelergy [^`]*)`", text)
    assert commands, "docs/run.md names no accelergy command"
    written = set(accelergy_files(["mu"], ["read_byte"], [1], [1.0]))  # the side files of a run
    parser = _accelergy_04_command_line()
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert sorted(args.files) == sorted(written), command  # the run's two files, as inputs
        assert args.output_files == ["energy_estimation"], command  # not "all": no area, no architecture
    # why the order matters: -f takes every word after it, leaving no input file
    assert parser.parse_args(["-f", "energy_estimation", *written]).files == []


def _flatten(node: dict, prefix: str | None, out: dict) -> dict:
    """Accelergy's reading of an action-counts tree: a ``local`` node's full name is its
    ``subtree`` parents' names and its own, joined by dots."""
    join = (lambda n: n) if prefix is None else (lambda n: f"{prefix}.{n}")
    for local in node.get("local", []):
        assert set(local) == {"name", "action_counts"}
        out[join(local["name"])] = local["action_counts"]
    for sub in node.get("subtree", []):
        _flatten(sub, join(sub["name"]), out)
    return out


def _accelergy_prices_the_run(out):
    """Both files in Accelergy 0.4's documented format (top keys, version '0.4' as Accelergy
    writes it, tables/name/actions/arguments/energy; action_counts/subtree/local/counts), and
    pricing the counts by the ERT as Accelergy does (component by full name, action by name,
    arguments null, energy in pJ) gives the run's energy: no hand-written table (issue 20 item 18)."""
    import json

    import yaml

    counts = yaml.safe_load((out / "action_counts.yaml").read_text())
    ert = yaml.safe_load((out / "ERT.yaml").read_text())
    assert set(counts) == {"action_counts"} and set(ert) == {"ERT"}
    # a string: Accelergy 0.4 warns "File version is 0.4, while the latest version is 0.4" of a number
    assert counts["action_counts"]["version"] == "0.4" == ert["ERT"]["version"]
    assert set(ert["ERT"]) == {"version", "tables"} and isinstance(ert["ERT"]["tables"], list)
    flat = _flatten(counts["action_counts"], None, {})
    tables = {}
    for t in ert["ERT"]["tables"]:
        assert set(t) == {"name", "actions"}
        for a in t["actions"]:
            assert set(a) == {"name", "arguments", "energy"} and a["arguments"] is None
            assert isinstance(a["energy"], float) and a["energy"] >= 0  # a float to YAML 1.1 readers too
        tables[t["name"]] = {a["name"]: a["energy"] for a in t["actions"]}
    assert set(flat) == set(tables) == {f"rdasim_chip.{c}" for c in COMPONENTS}
    pj = math.fsum(entry["counts"] * tables[name][entry["name"]] for name, acts in flat.items() for entry in acts)
    assert all(isinstance(entry["counts"], int) for acts in flat.values() for entry in acts)
    summary = json.loads((out / "run.json").read_text())["summary"]
    assert summary["energy_joules"] > 0
    assert pj * 1e-12 == pytest.approx(summary["energy_joules"], rel=1e-12)

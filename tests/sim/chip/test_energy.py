"""Energy: components sum to the total, counts x table by hand, twice the work twice the joules."""

import math
from pathlib import Path

import pytest

from cluster.cli import main
from cluster.results.layout import read_table
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
    one, t1 = run(_kv(3, memory))[:2]
    two = run(_kv(6, memory))[0]
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
    s, t = run(raw)[:2]
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
    virt = run(_kv(3))[0]
    real = run(_kv(3, REALLOC))[0]
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
    assert text.startswith("action_counts:\n  version: 0.3\n")
    for a, n in zip(energy["action"], energy["count"]):
        assert f"- name: {a}\n" in text and f"counts: {n}\n" in text
    bad = tmp_path / "bad.toml"
    bad.write_text("[table]\nname = 1\n")
    assert main(["run", str(ROOT / "examples" / "kv_decode_trace.toml"), "--quiet",
                 "--set", f"energy.table={bad}"]) == 2
    assert "energy.table" in capsys.readouterr().err

"""Config loading: defaults and units normalised, every error at once with key paths, overrides, hashing."""

import pytest

from cluster.config import ConfigError, Field, Table, config_hash, load
from cluster.config.noc import NOC_SCHEMA, params_of

SCHEMA = Table({
    "arch": Table({"clock": Field("frequency", "1GHz"), "sram": Field("size", "256KiB")}),
    "noc": Table({"latency": Field("cycles", 1, clock="arch.clock"), "k": Field("int", 8, min=2)}),
})


def test_defaults_are_normalised_and_times_become_cycles():
    cfg = load(SCHEMA, raw={"arch": {"clock": "2GHz"}, "noc": {"latency": "20ns"}})
    assert cfg["arch"]["sram"] == 262144
    assert cfg["noc"]["latency"] == 40  # 20 ns at 2 GHz


def test_every_error_reported_with_path_and_hint():
    with pytest.raises(ConfigError) as err:
        load(SCHEMA, raw={"arch": {"clok": "1GHz", "sram": "lots"}, "noc": {"k": 1}, "nocc": {}})
    text = err.value.render()
    assert len(err.value.issues) == 4
    assert "arch.clok: unknown key; did you mean 'arch.clock'?" in text
    assert "arch.sram" in text and "noc.k: 1 is below the minimum 2" in text
    assert "nocc: unknown key; did you mean 'noc'?" in text


def test_unknown_key_in_wrong_section_points_to_the_right_one():
    with pytest.raises(ConfigError) as err:
        load(NOC_SCHEMA, raw={"noc": {"seed": 3}})
    assert "did you mean 'run.seed'?" in err.value.render()


def test_overrides_and_flags_say_the_same_as_the_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[noc]\nk = 4\ntraffic = "transpose"\n[run]\nseed = 5\n')
    a = load(NOC_SCHEMA, f)
    b = load(NOC_SCHEMA, None, ["noc.k=4", "noc.traffic=transpose", "run.seed=5"])
    c = load(NOC_SCHEMA, None, extra=[("noc.k", 4), ("noc.traffic", "transpose"), ("run.seed", 5)])
    assert a == b == c and config_hash(a) == config_hash(c)
    assert config_hash(load(NOC_SCHEMA, f, ["run.seed=6"])) != config_hash(a)
    assert params_of(a, 0.1).rows == 4


def test_cross_field_checks():
    with pytest.raises(ConfigError, match="either k"):
        load(NOC_SCHEMA, raw={"noc": {"k": 4, "rows": 4}})
    with pytest.raises(ConfigError, match=r"outside \(0, packet_flits"):
        load(NOC_SCHEMA, raw={"noc": {"rates": [0.1, 2.0]}})

"""Unit strings to plain numbers: known values per kind, exact rounding to cycles, errors that say what is wrong."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cluster.config import ConfigError, Field, Table, load
from cluster.config.units import (
    UnitError,
    parse_bandwidth,
    parse_flops,
    parse_frequency,
    parse_size,
    parse_time,
    time_to_cycles,
)


@pytest.mark.parametrize("text,value", [
    ("256KiB", 262144), ("1.5MiB", 1572864), ("2MB", 2_000_000), ("4096", 4096), (512, 512),
    ("8Kib", 1024), ("1 GiB", 2**30), ("520MB", 520_000_000), ("256B", 256), ("1_024", 1024),
    ("1e3B", 1000), ("2kB", 2000), ("64b", 8), (" 3 TiB ", 3 * 2**40), (4096.0, 4096), (".5KiB", 512),
])
def test_sizes(text, value):
    got = parse_size(text)
    assert got == value and type(got) is int


@pytest.mark.parametrize("bad,words", [
    ("12XB", "unknown prefix 'X' in size '12XB'"),
    ("1.5B", "size '1.5B' is not a whole number of bytes"),
    ("12b", "size '12b' is not a whole number of bytes"),  # 1.5 bytes
    ("-4KiB", "size '-4KiB' is negative"),
    (-1, "size -1 is negative"),
    ("fast", "cannot read 'fast' as a number with a unit"),
    ("3GHz", "cannot read '3GHz' as a size"),
    (True, "expected a size, got True"),
])
def test_bad_sizes_say_what_is_wrong(bad, words):
    with pytest.raises(UnitError, match=words):
        parse_size(bad)


@given(st.integers(0, 2**40))
def test_size_roundtrip_in_kib(n):
    assert parse_size(f"{n}KiB") == n * 1024 and parse_size(f"{n}B") == n and parse_size(f"{8 * n}b") == n


@pytest.mark.parametrize("parse,text,value", [
    (parse_frequency, "1GHz", 1e9), (parse_frequency, "800 MHz", 8e8), (parse_frequency, "1.4GHz", 1.4e9),
    (parse_frequency, "50kHz", 5e4), (parse_frequency, 2e9, 2e9),
    (parse_bandwidth, "450GB/s", 450e9), (parse_bandwidth, "100Gb/s", 12.5e9), (parse_bandwidth, "1.6TB/s", 1.6e12),
    (parse_bandwidth, "1GiB/s", 2**30), (parse_bandwidth, "25GBps", 25e9), (parse_bandwidth, 4.5e11, 4.5e11),
    (parse_time, "20ns", 20e-9), (parse_time, "1.5us", 1.5e-6), (parse_time, "2µs", 2e-6), (parse_time, "3ms", 3e-3),
    (parse_time, "1s", 1.0), (parse_time, "250ps", 250e-12), (parse_time, 2e-8, 2e-8),
    (parse_flops, "638TFLOPS", 638e12), (parse_flops, "312 TFLOP/s", 312e12), (parse_flops, "1.5PFLOPS", 1.5e15),
    (parse_flops, "10GFLOPs", 1e10), (parse_flops, 3.12e14, 3.12e14),
])
def test_known_values_of_each_kind(parse, text, value):
    assert parse(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("parse,bad,words", [
    (parse_frequency, "1GB", "cannot read '1GB' as a frequency"),
    (parse_frequency, "1XHz", "unknown prefix 'X' in frequency"),
    (parse_bandwidth, "450GB", "cannot read '450GB' as a bandwidth"),
    (parse_time, "5min", "cannot read '5min' as a time"),
    (parse_time, "20", "cannot read '20' as a time"),  # a bare string number has no unit
    (parse_flops, "312T", "cannot read '312T' as a compute rate"),
    (parse_time, True, "cannot read 'True' as a number"),  # a flag is not a time
])
def test_other_kinds_refuse_the_wrong_unit(parse, bad, words):
    with pytest.raises(UnitError, match=words):
        parse(bad)


@pytest.mark.parametrize("seconds,hz,cycles", [
    (20e-9, 1e9, 20), (20e-9, 2e9, 40), (3e-9, 1e9, 3),  # exact, despite 3e-9 * 1e9 = 3.0000000000000004
    (1.2e-9, 1e9, 2), (0.0, 1e9, 0), (1e-12, 1e9, 1),  # a part of a cycle costs a whole one
])
def test_times_round_up_to_whole_cycles(seconds, hz, cycles):
    assert time_to_cycles(seconds, hz) == cycles


SCHEMA = Table({"chip": Table({
    "clock": Field("frequency", "1GHz"), "mu_bytes": Field("size", "512KiB"), "hbm": Field("bandwidth", "1TB/s"),
    "latency": Field("cycles", 1, clock="chip.clock"),
})})


def test_a_bad_value_in_a_config_is_named_by_its_key():
    with pytest.raises(ConfigError) as err:
        load(SCHEMA, raw={"chip": {"clock": "1GB", "mu_bytes": "1.5B", "hbm": "fast", "latency": "5min"}})
    paths = {issue.path: issue.message for issue in err.value.issues}
    assert set(paths) == {"chip.clock", "chip.mu_bytes", "chip.hbm", "chip.latency"}
    assert "'1GB' as a frequency" in paths["chip.clock"] and "whole number of bytes" in paths["chip.mu_bytes"]
    assert "chip.mu_bytes: size '1.5B' is not a whole number of bytes" in err.value.render()


def test_a_config_time_becomes_cycles_at_its_clock():
    cfg = load(SCHEMA, raw={"chip": {"clock": "1.5GHz", "latency": "10ns"}})
    assert cfg["chip"] == {"clock": 1.5e9, "mu_bytes": 524288, "hbm": 1e12, "latency": 15}


# A bare number for a bandwidth, a time, a frequency or a compute rate is refused, naming the units
# it could have meant (once read as 64 B/s, 64 s, 64 Hz without a word); sizes stay bare in bytes
# and cycles in cycles (the simulator's native integers), zero needs no unit, and a default the
# code writes in base units is taken as it is.
QUANTITIES = Table({"q": Table({
    "bw": Field("bandwidth", 1e9), "t": Field("time", 5.0), "f": Field("frequency", 1e9), "rate": Field("flops", 1e12),
    "size": Field("size", 4096), "clock": Field("frequency", "1GHz"), "delay": Field("cycles", 1, clock="q.clock"),
})})


@pytest.mark.parametrize("key,value,named", [
    ("bw", 64, ['"64GB/s"', '"64Gb/s"', '"64B/s"']), ("t", 20, ['"20ms"', '"20ns"', '"20s"']),
    ("f", 800, ['"800GHz"', '"800MHz"', '"800Hz"']), ("rate", 2.5, ['"2.5TFLOPS"', '"2.5FLOPS"']),
])
def test_a_bare_number_for_a_quantity_with_units_is_refused_naming_the_units(key, value, named):
    with pytest.raises(ConfigError) as err:
        load(QUANTITIES, raw={"q": {key: value}})
    (issue,) = err.value.issues
    kind = QUANTITIES.fields["q"].fields[key].kind
    assert issue.path == f"q.{key}" and f"has no unit: a {kind} needs one" in issue.message
    assert all(n in issue.message for n in named)


@pytest.mark.parametrize("key,value,first", [("f", 1_000_000_000, "1GHz"), ("f", 1.4, "1.4Hz"), ("t", 2e-8, "20ns"),
                                             ("t", 1500, "1500s"), ("bw", 4.5e11, "450GB/s"),
                                             ("rate", 3.12e14, "312TFLOPS"), ("f", 12345.678, "12.345678kHz")])
def test_every_spelling_a_hint_gives_is_a_value_the_loader_accepts(key, value, first):
    """The hint for a bare number names values that load (1000000000 Hz was hinted as
    "1e+09GHz", an exponent the hint should not need, and a billion times too fast): its first, the
    number in the base unit, loads back to the number itself."""
    with pytest.raises(ConfigError) as err:
        load(QUANTITIES, raw={"q": {key: value}})
    hints = re.findall(r'"([^"]+)"', err.value.issues[0].message)
    assert len(hints) >= 3 and not any("e+" in h or "e-" in h for h in hints)
    loaded = [load(QUANTITIES, raw={"q": {key: h}})["q"][key] for h in hints]  # every one is accepted
    assert hints[0] == first and loaded[0] == pytest.approx(value, rel=1e-12)


def test_sizes_and_cycles_stay_bare_zero_needs_no_unit_and_code_defaults_are_in_base_units():
    cfg = load(QUANTITIES, raw={"q": {"size": 256, "delay": 3, "bw": 0}})["q"]
    assert (cfg["size"], cfg["delay"], cfg["bw"]) == (256, 3, 0.0)  # bytes, cycles, zero
    assert (cfg["t"], cfg["f"], cfg["rate"]) == (5.0, 1e9, 1e12)  # the defaults, in s, Hz, FLOP/s
    spelled = load(QUANTITIES, raw={"q": {"bw": "64GB/s", "t": "20ns", "f": "800MHz", "rate": "2.5TFLOPS"}})["q"]
    assert (spelled["bw"], spelled["t"], spelled["f"], spelled["rate"]) == (64e9, 20e-9, 800e6, 2.5e12)


def test_a_bare_link_bandwidth_is_exit_2_before_anything_runs(capsys):
    from cluster.cli import main
    from tests.paths import EXAMPLES

    code = main(["run", str(EXAMPLES / "system_moe_alltoall.toml"), "--set", "system.network[0].link_bandwidth=64"])
    assert code == 2
    err = capsys.readouterr().err
    # named by the --set that gave it, not by the file
    assert ('--set system.network[0].link_bandwidth=64: 64 has no unit: a bandwidth needs one; in B/s that is '
            '"64B/s" (read in other units: "64GB/s"') in err


def test_a_presets_numbers_are_its_base_units_exactly():
    """`rdasim map` presets are code: their bare numbers are B/s and s, spelled so before the user's keys."""
    from cluster.config.map import resolve
    from mapping.presets import preset_spec

    spec = preset_spec("gpt3-1t-sn30")
    cfg = resolve(preset="gpt3-1t-sn30")
    assert [d["link_bandwidth"] for d in cfg["system"]["network"]] == [d["link_bandwidth"]
                                                                      for d in spec["system"]["network"]]
    assert cfg["system"]["chip_overrides"]["dram_bandwidth"] == 0  # not given: the default, keep the chip's
    over = resolve(preset="gpt3-1t-sn30", overrides=["system.network[1].link_bandwidth=25GB/s"])
    assert over["system"]["network"][1]["link_bandwidth"] == 25e9

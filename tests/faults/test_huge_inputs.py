"""Huge sizes and counts are refused before anything is allocated (exit 2 naming the key and the bytes), under a
memory limit; integers past 64 bits are refused when the config is read."""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import ROOT, one_line_error, rdasim

DECODE = ROOT / "examples" / "kv_decode.toml"
QUICK = 20  # seconds: each case is refused in about one start-up of the command (the old code ran minutes, or died)


@pytest.mark.parametrize("setting,needle", [
    ("workload.decode.requests=1000000000", "workload.decode.requests: 1,000,000,000: this simulation would need "
                                            "about 326.0 GiB"),
    ("workload.decode.heads=1000000000", "workload.decode.heads: 1,000,000,000: this simulation would need about "
                                         "5.8 TiB"),
])
def test_a_huge_workload_count_is_refused_naming_the_key_and_the_bytes(setting, needle):
    err = one_line_error(rdasim("run", DECODE, "--set", setting, timeout=QUICK))
    assert needle in err


def test_a_billion_shards_is_refused_at_once():
    start = time.monotonic()
    err = one_line_error(rdasim("run", DECODE, "--set", "run.shards=1000000000", timeout=QUICK))
    assert "cannot cut 8 rows into 1000000000 row bands" in err and "at most 128" in err
    assert time.monotonic() - start < QUICK


def test_a_random_sweep_of_a_trillion_samples_is_refused_before_a_draw(tmp_path):
    spec = tmp_path / "r.toml"
    spec.write_text('[sweep]\nname = "r"\ncommand = "noop"\n[random]\nsamples = 1000000000000\n'
                    '[random.axes]\n"noop.value" = {uniform = [0, 1]}\n')
    err = one_line_error(rdasim("sweep", spec, "--dry-run", timeout=QUICK))
    assert "random.samples: 1,000,000,000,000 points would need about 3.1 PiB of memory to plan" in err


@pytest.mark.parametrize("key", ["run.seed", "workload.decode.requests"])
def test_an_integer_past_64_bits_is_refused_when_read(key):
    err = one_line_error(rdasim("run", DECODE, "--set", f"{key}={10**30}", timeout=QUICK))
    assert f"--set {key}={10**30}: {10**30} is out of range: a whole number here must fit in 64 bits" in err

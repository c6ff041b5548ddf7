"""Memory estimated before a run: it grows with the grid and shrinks with shards, and an absurd size is refused
with the key that drives it."""

import pytest

from cluster.config import ConfigError, load
from cluster.config import footprint as fp
from cluster.config.noc import NOC_SCHEMA, check_footprint
from cluster.config.run import RUN_SCHEMA, chip_spec
from sim.chip.spec import PRESETS
from sim.memory.policies import MuGeometry, policy_params
from sim.network import NETWORKS


def _noc(k: int, shards: int = 1, cycles: int = 10_000) -> fp.Estimate:
    return fp.noc_estimate(k, k, 4, 4, shards, cycles, "noc.k")


def _chip(rows: int, cols: int, mu_bytes: int = 2**20, policy: str = "virtual", shards: int = 1,
          network: str = "packet") -> fp.Estimate:
    mu = policy_params(policy).footprint(MuGeometry(mu_bytes))
    return fp.chip_estimate(rows, cols, rows * cols // 2, mu, NETWORKS.get(network).route_entry_bytes, shards)


def test_the_estimate_grows_with_the_grid():
    noc = [_noc(k).bytes for k in range(2, 120)]
    assert all(a < b for a, b in zip(noc, noc[1:]))
    for grow in (lambda n: _chip(n, 8), lambda n: _chip(8, n), lambda n: _chip(n, n, policy="static-multi")):
        chip = [grow(n).bytes for n in range(2, 80)]
        assert all(a < b for a, b in zip(chip, chip[1:]))
    mu = [_chip(8, 8, mu_bytes=2**i).bytes for i in range(12, 40)]
    assert all(a < b for a, b in zip(mu, mu[1:]))


def test_more_shards_never_need_more_per_shard():
    for est in (lambda s: _noc(64, s), lambda s: _chip(32, 32, shards=s)):
        sizes = [est(s).bytes for s in range(1, 65)]
        assert all(a >= b for a, b in zip(sizes, sizes[1:]))
        assert sizes[0] > 10 * sizes[-1]


def test_only_the_virtual_policy_pays_for_block_tables():
    keys = [t.key for t in _chip(8, 8, policy="static-multi").terms]
    assert "chip.mu_bytes" not in keys and "chip.mu_bytes" in [t.key for t in _chip(8, 8).terms]
    # 32 MUs of 1 MiB in 4 KiB blocks: 256 blocks each, about 46 bytes of bookkeeping a block
    [blocks] = [t for t in _chip(8, 8).terms if t.key == "chip.mu_bytes"]
    assert blocks.bytes == 32 * 256 * 46 and blocks.what == "a block table of 256 blocks in each of 32 MUs"


def test_the_estimate_asks_the_policy_and_the_network_not_their_names():
    from dataclasses import dataclass

    from sim.memory.policies import Footprint, PolicyParams

    @dataclass(frozen=True)
    class Ledger(PolicyParams):  # a policy the estimate has never heard of, keeping 1 KiB per MU
        name: str = "ledger"

        def footprint(self, mu):
            return Footprint(1024.0, "a ledger")

    est = fp.chip_estimate(8, 8, 32, Ledger().footprint(MuGeometry(2**20)), 4, 1)
    last = est.terms[-1]
    assert (last.key, last.bytes, last.what) == ("chip.mu_bytes", 32 * 1024.0, "a ledger in each of 32 MUs")
    # a model's own routing table: the packet model's entries take 12 bytes at their peak, the cycle model's 4
    tables = {n: _chip(8, 8, network=n).terms[0].bytes for n in ("cycle", "packet")}
    assert tables == {"cycle": 4.0 * 64 * 64, "packet": 12.0 * 64 * 64}


def test_a_thousand_by_thousand_noc_needs_the_documented_3_6_tib_routing_table():
    # numpy's "Unable to allocate 3.64 TiB": 10^6 routers x 10^6 destinations x 4 bytes
    est = _noc(1000)
    assert est.largest.bytes == 4e12 and est.largest.key == "noc.k"
    assert fp.human(est.largest.bytes) == "3.6 TiB"


@pytest.mark.parametrize("n,text", [(0, "0 B"), (1023, "1,023 B"), (1024, "1.0 KiB"), (1.5 * 2**30, "1.5 GiB"),
                                    (2**60, "1.0 EiB"), (2**70, "1,024.0 EiB")])
def test_human_sizes(n, text):
    assert fp.human(n) == text


def test_refused_only_beyond_the_memory_there_is():
    est = _noc(64)
    assert fp.problem(est, {}, available=int(est.bytes)) is None
    key, message = fp.problem(est, {"noc.k": 64}, available=int(est.bytes) - 1)
    assert key == "noc.k" and message.startswith("64: this simulation would need about")


@pytest.mark.parametrize("raw,key", [
    ({"noc": {"k": 1000}}, "noc.k"),
    ({"noc": {"rows": 2000, "cols": 1000}}, "noc.rows x noc.cols"),
    ({"noc": {"k": 4, "drain_cycles": 10**14}}, "noc.warmup_cycles + measure_cycles + drain_cycles"),
])
def test_an_absurd_noc_is_refused_with_the_key_that_drives_it(raw, key):
    with pytest.raises(ConfigError) as err:
        check_footprint(load(NOC_SCHEMA, raw=raw))
    [issue] = err.value.issues
    assert issue.path == key and "this machine has" in issue.message


def test_a_reasonable_noc_is_not_refused():
    check_footprint(load(NOC_SCHEMA, raw={"noc": {"k": 16}}))


@pytest.mark.parametrize("chip,key", [
    ({"rows": 20_000, "cols": 20_000}, "chip.rows x chip.cols"),  # an EiB of routing table
    ({"mu_bytes": "64TiB"}, "chip.mu_bytes"),  # ~ 0.5 PiB of block tables
])
def test_an_absurd_chip_is_refused_with_the_key_that_drives_it(chip, key):
    cfg = load(RUN_SCHEMA, raw={"chip": chip, "memory": {"policy": "virtual"}})
    spec, _ = chip_spec(cfg["chip"])
    [issue] = fp.chip_issues(spec, cfg["memory"], cfg["noc"], cfg["run"])
    assert issue.path == key and "this simulation would need about" in issue.message
    assert fp.chip_issues(PRESETS[cfg["chip"]["preset"]], cfg["memory"], cfg["noc"], cfg["run"]) == []


def test_auto_shards_may_choose_one():
    assert fp.least_shards("auto") == 1 and fp.least_shards(8) == 8

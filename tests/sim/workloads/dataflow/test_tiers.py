"""A mapped run whose weights and KV caches live in memory tiers (weights = "hbm", kv = "hbm"):
what moves where, the model switch from DDR, a tier that is too small."""

import math

import pytest

from sim.chip import messages as m
from sim.chip.config import NI_LATENCY
from tests.sim.chip.chiprun import config, run

SMALL = {"preset": "sn40l", "rows": 8, "cols": 16}  # 64 CUs and 64 MUs; HBM at (4, 0), DDR at (4, 15)
DECODE = {"hidden": 256, "heads": 4, "context": 128, "batch": 4, "layers": 2, "steps": 1, "tile_size": 2}


def decode(passes: int = 2, chip: dict | None = None, **keys) -> dict:
    return {"chip": dict(chip or SMALL),
            "workload": {"kind": "dataflow", "dataflow": {
                "passes": passes, **keys, "mapping": {"time_limit": "20s"},
                "graph": {"kind": "decode", "name": "decode-step", "word": 2, "decode": dict(DECODE)}}}}


def _zero_load(cfg, kind, hops):
    (flits,) = cfg.sizing.packet_flits(kind, 0)
    return cfg.noc.with_(packet_flits=flits).zero_load_latency(hops)


@pytest.fixture(scope="module")
def homed():
    raw = decode(weights="hbm", kv="hbm", batched_reads="share")
    return config(raw), run(raw)


def test_weights_and_caches_stream_from_hbm_every_pass(homed):
    """Every pass reads one layer's weights (each byte once) and the K and V caches from HBM and
    writes the new entries to it; no weight and no cache takes MU room."""
    cfg, done = homed
    s, p = done.summary, cfg.workload
    d = DECODE
    weights = 2 * (4 * d["hidden"] ** 2 + 2 * d["hidden"] * 4 * d["hidden"])  # Q, K, V, PROJ, FFN0, FFN1
    caches = 2 * d["batch"] * d["context"] * d["hidden"] * 2  # K and V, every sequence
    new = 2 * d["batch"] * d["hidden"] * 2
    assert s["completed"] and s["status"] == "completed"
    assert s["hbm_read_bytes"] == 2 * (weights + caches)
    assert s["hbm_write_bytes"] == 2 * new
    assert not p.caches and all(b.kind != "weight" for part in p.partitions for b in part.buffers)
    # the regions: every layer's weights, and the caches growing by a pass's new entries
    assert (p.weight_bytes, p.kv_bytes, p.kv_growth) == (2 * weights, 2 * caches, 2 * new)
    page = cfg.spec.tiers[0].page_bytes
    assert s["hbm_peak_bytes"] == page * (math.ceil(2 * weights / page) + math.ceil((2 * caches + 2 * new) / page))
    assert s["ddr_flows"] == 0 and s["energy_hbm_joules"] > 0


def test_the_mapper_counts_streamed_weights_in_the_memory_term(homed):
    cfg, done = homed
    part = cfg.workload.partitions[0]
    spec = cfg.spec
    d = DECODE
    weights = 2 * (4 * d["hidden"] ** 2 + 2 * d["hidden"] * 4 * d["hidden"])
    caches = 2 * d["batch"] * d["context"] * d["hidden"] * 2
    new = 2 * d["batch"] * d["hidden"] * 2  # the caches' new entries (the decode graph's extra traffic)
    assert part.memory_seconds == pytest.approx((weights + caches + new) / spec.tiers[0].bandwidth, rel=1e-6)


def test_results_are_the_same_for_every_shard_count(homed):
    raw = decode(weights="hbm", kv="hbm", batched_reads="share")
    ref = homed[1].summary
    for shards, cut in [(2, "rows"), (4, "blocks")]:
        s = run(raw, shards=shards, cut=cut).summary
        assert (s["result_hash"], s["sim_cycles"]) == (ref["result_hash"], ref["sim_cycles"]), (shards, cut)


def test_weights_homed_in_ddr_are_switched_into_hbm_first():
    """The model switch: the weights copied from DDR into HBM at DDR's bandwidth (100 GB/s, 62.5
    B/cycle at 1.6 GHz) and its latency, before the first pass; then streamed from HBM."""
    raw = decode(passes=1, weights="ddr")
    cfg = config(raw)
    s = run(raw).summary
    w = cfg.workload.weight_bytes
    ddr = cfg.spec.tiers[1]
    switch = math.ceil(w / ddr.bytes_per_cycle(cfg.spec.clock_hz)) + ddr.latency_cycles(cfg.spec.clock_hz)
    assert s["completed"] and s["ddr_read_bytes"] == w and s["ddr_peak_bytes"] >= w
    # the copy, plus the request's and the acknowledgement's trips over the NoC between the
    # controller at (0, 0) and the DDR controller at (4, 15)
    trips = NI_LATENCY + _zero_load(cfg, m.CONTROL, 19) + _zero_load(cfg, m.ACK, 19)
    assert s["model_switch_seconds"] * cfg.spec.clock_hz == pytest.approx(switch + trips, abs=1e-6)
    assert s["hbm_write_bytes"] >= w  # the copy lands in HBM


def test_a_tier_too_small_for_the_weights_fails_the_run_and_says_so():
    from cluster.config.loader import ConfigError

    # the mapper sees the first tier as the chip's DRAM: an HBM too small is a plan that does not fit
    with pytest.raises(ConfigError, match="DRAM capacity"):
        config(decode(chip={**SMALL, "hbm": {"capacity": "2MiB"}}, weights="hbm"))
    # a DDR too small for the weights homed there: the tier refuses the region, no pass runs
    s = run(decode(passes=2, chip={**SMALL, "ddr": {"capacity": "2MiB"}}, weights="ddr")).summary
    assert s["status"] == "failed" and s["requests_failed"] == 2 and s["tier_full_events"] == 1


def test_a_tier_the_chip_lacks_is_a_config_error():
    from cluster.config.loader import ConfigError

    with pytest.raises(ConfigError, match="has no such memory"):
        config(decode(weights="ssd"))
    with pytest.raises(ConfigError, match="has no such memory"):
        config(decode(chip={"preset": "plasticine"}, kv="hbm"))
    with pytest.raises(ConfigError, match="holds no page"):
        config(decode(chip={**SMALL, "ddr": {"capacity": "1MiB"}}))
    with pytest.raises(ConfigError, match="has no HBM tier"):
        config(decode(chip={"preset": "plasticine", "hbm": {"capacity": "1GB"}}))

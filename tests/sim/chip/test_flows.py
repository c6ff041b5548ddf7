"""Bulk transfers as flows on the chip: a stream alone at its bottleneck exactly, the flow model
against the packet model (within 2 %, docs/run.md's table), and the same results for any cut."""

import math

import pytest

from sim.chip import messages as m
from sim.chip.config import NI_LATENCY
from tests.paths import benchmark
from tests.sim.chip.chiprun import config, run

SN40L_SMALL = {"preset": "sn40l", "rows": 4, "cols": 8}  # HBM controller at (2, 0), DDR at (2, 7)


def stream(chip: dict, bulk: str = "", **keys) -> dict:
    raw = {"chip": dict(chip), "workload": {"kind": "stream", "stream": {"chunk": 65536, **keys}}}
    if bulk:
        raw["noc"] = {"bulk": bulk}
    return raw


def _zero_load(cfg, kind, data, hops):
    (flits,) = cfg.sizing.packet_flits(kind, data)
    return cfg.noc.with_(packet_flits=flits).zero_load_latency(hops)


@pytest.mark.parametrize("nbytes", [4096, 65536, 1 << 20])
def test_a_single_stream_takes_bytes_over_its_bottleneck_exactly(nbytes):
    """One CU asks the HBM tier for ``nbytes`` in one request: the request's header crosses the
    NoC, the flow moves at its bottleneck (the CU's link, 2048 data bytes per 33 flits: the
    tier's 1000 B/cycle is far more), the tier's latency, the response's header comes back."""
    raw = stream(SN40L_SMALL, cus=[[0, 2]], matrices=[[nbytes // 2, 1]], batch=0, chunk=nbytes, prefetch=1)
    cfg = config(raw)
    done = run(raw)
    s = done.summary
    (rec,) = [r for res in done.simulation.outcome.reports for r in res.records]
    rate = cfg.sizing.link_data_rate()
    assert rate == 2048 / 33
    hops = 2 + 2  # CU (0, 2) to the HBM controller at (2, 0)
    tier = cfg.spec.tiers[0]
    arrive = rec.start + NI_LATENCY + _zero_load(cfg, m.READ_REQ, 0, hops)
    done_at = arrive + math.ceil(nbytes / rate) + tier.latency_cycles(cfg.spec.clock_hz)
    assert rec.end == done_at + _zero_load(cfg, m.READ_RESP, 0, hops)  # offered when ready
    assert s["hbm_read_bytes"] == nbytes and s["hbm_flows"] == 1 and s["flits_total"] == 2  # headers only


BENCH = benchmark("real_scale")  # its flow-vs-packet table is the one tested here
FLOW_VS_PACKET = BENCH.FLOW_VS_PACKET


@pytest.mark.parametrize("name", sorted(FLOW_VS_PACKET))
def test_flows_match_packets_within_2_percent(name):
    """The same transfers on the same chip, their data in packets (DRAM interfaces serving in
    order, 2 KiB packets over the NoC) or as flows: the run's cycles agree within 2 %
    (benchmarks/real_scale.py prints the table)."""
    packets, flows = BENCH.flow_vs_packet(FLOW_VS_PACKET[name])
    assert abs(flows - packets) <= 0.02 * packets, (packets, flows)


def test_flow_runs_are_identical_for_every_shard_count_and_cut():
    raw = stream(SN40L_SMALL, matrices=[[2048, 512]], batch=4, chunk=16384)
    ref = run(raw)
    s0 = ref.summary
    assert s0["completed"] and s0["hbm_flows"] > 16
    for shards, cut in [(2, "rows"), (3, "cols"), (4, "blocks")]:
        s = run(raw, shards=shards, cut=cut).summary
        assert (s["result_hash"], s["sim_cycles"], s["hbm_read_bytes"]) == (
            s0["result_hash"], s0["sim_cycles"], s0["hbm_read_bytes"]), (shards, cut)


@pytest.mark.ray
def test_flow_runs_match_on_ray(ray_session):
    raw = stream(SN40L_SMALL, matrices=[[2048, 512]], batch=4, chunk=16384)
    ref = run(raw).summary
    s = run(raw, shards=2, cut="rows", backend="ray").summary
    assert s["result_hash"] == ref["result_hash"]


def test_a_tier_that_only_a_named_source_has_is_an_error():
    from cluster.config.loader import ConfigError

    with pytest.raises(ConfigError, match="no such memory tier"):
        config(stream(SN40L_SMALL, source="ssd"))
    with pytest.raises(ConfigError, match="whose data moves as flows"):
        config(stream(SN40L_SMALL, bulk="packets"))


def test_evictions_land_in_hbm_as_pages_and_flows():
    """memory.on_oom = "evict" on a chip with tiers: every evicted buffer goes to the HBM tier
    as a flow and takes its pages there until it is freed; the run completes as on DRAM."""
    raw = {"chip": {**SN40L_SMALL, "mu_bytes": "8KiB", "hbm": {"page": "4KiB"}},
           "memory": {"policy": "virtual", "block_bytes": "1KiB", "on_oom": "evict"},
           "workload": {"kind": "kv-decode", "decode": {
               "requests": 8, "max_batch": 8, "layers": 1, "heads": 2, "head_dim": 64,
               "prompt_tokens": {"dist": "fixed", "mean": 24}, "output_tokens": {"dist": "fixed", "mean": 10}}}}
    done = run(raw)
    s = done.summary
    assert s["completed"] and s["evictions"] > 0 and s["use_after_free"] == s["leaks"] == 0
    assert s["hbm_write_bytes"] >= s["bytes_evicted"] and s["hbm_flows"] >= s["evictions"]
    assert s["hbm_peak_bytes"] >= 4096 and s["tier_full_events"] == 0
    (hbm,) = [res.tiers["hbm"] for res in done.simulation.outcome.reports if "hbm" in res.tiers]
    assert hbm["end_bytes"] == 0  # every evicted buffer was freed: its pages are back


def test_an_eviction_a_full_tier_cannot_hold_fails_the_run_naming_it():
    """The same run with an HBM of two 4 KiB pages: the evicted buffers' pages run out, and
    evicted data with nowhere to live fails the run, saying which tier and what to raise."""
    raw = {"chip": {**SN40L_SMALL, "mu_bytes": "8KiB", "hbm": {"page": "4KiB", "capacity": "8KiB"}},
           "memory": {"policy": "virtual", "block_bytes": "1KiB", "on_oom": "evict"},
           "workload": {"kind": "kv-decode", "decode": {
               "requests": 8, "max_batch": 8, "layers": 1, "heads": 2, "head_dim": 64,
               "prompt_tokens": {"dist": "fixed", "mean": 24}, "output_tokens": {"dist": "fixed", "mean": 10}}}}
    s = run(raw).summary
    assert s["hbm_peak_bytes"] == 8192 and s["tier_full_events"] > 0
    assert s["status"] == "failed"
    assert s["status_detail"].startswith("HBM full: ") and "chip.hbm.capacity" in s["status_detail"]

"""Mapped execution against closed forms: compute-bound, DRAM-bound and pipelined partitions."""

import dataclasses

import pytest

from cluster.jobs.chip import simulate_chip
from mapping.chips import RDA_PRESETS
from mapping.graph import Kernel
from mapping.placement import place_on_grid
from sim.chip.config import NI_LATENCY
from sim.workloads.dataflow import DataflowParams, plan_addresses
from tests.sim.chip.chiprun import config
from tests.sim.workloads.dataflow.harness import EW, GG, GW, chain, plan_of, run_plan

SPEC = RDA_PRESETS["plasticine"]


def test_a_compute_bound_kernel_takes_its_flops_over_its_cus():
    # one GEMM, no tensors in or out: all 64 CUs, each lane x stage retiring an FMA (2 FLOP) a cycle
    plan = plan_of(chain([Kernel("only", GG, 4096, 4096, 64)]), 64, 8)
    done = run_plan(plan)
    s, tables = done.summary, done.tables
    flop = plan.kernels[0].flop
    ideal = flop / (SPEC.cu_count * SPEC.cu_flops_per_cycle * SPEC.clock_hz)
    assert tables["kernels"]["cus"] == [SPEC.cu_count]
    assert s["partitions"][0]["simulated_seconds"] == pytest.approx(ideal, rel=0.02)
    assert s["partitions"][0]["bound"] == "compute"


def test_a_dram_bound_partition_moves_its_bytes_at_the_dram_bandwidth():
    # a weight kernel alone in its partition streams its weight from DRAM, a slice per tile;
    # its compute (a twentieth of the transfer) overlaps the slices still coming but for the
    # last tiles' of the CUs the DRAM queues served last
    plan = plan_of(chain([Kernel("w", GW, 4096, 1024, 32)]), 32, 1)
    k = plan.kernels[0]
    assert k.streamed and plan.num_tiles == 32
    s = run_plan(plan).summary
    moved = k.weight_bytes
    assert s["partitions"][0]["simulated_seconds"] == pytest.approx(moved / SPEC.dram_bandwidth, rel=0.02)


def _latency(hops: int, nbytes: int, header_bits: int, field_bits: int) -> int:
    """Zero-load latency of one packet (the NoC's closed form, NocParams.zero_load_latency)."""
    cfg = config({"chip": {"preset": "plasticine"}})
    flits = -(-(header_bits + field_bits + 8 * nbytes) // SPEC.flit_bits)
    return cfg.noc.with_(packet_flits=flits).zero_load_latency(hops)


@pytest.mark.parametrize("k,n", [(2, 8), (4, 16)])
def test_a_linear_pipeline_takes_n_plus_k_minus_one_stages_plus_the_transfers(k, n):
    kernels = [Kernel(f"g{i}", GG, 64, 512, 16 * n) for i in range(k)]
    plan = plan_of(chain(kernels), 16 * n, 16, partitions=1)
    assert plan.num_tiles == n
    cfg = config({"chip": {"preset": "plasticine"}})
    placement = plan_addresses(place_on_grid(plan, cfg.spec, max_cus=1), cfg.spec.mu_bytes)
    params = DataflowParams.from_plan(plan, placement, cfg.spec)
    tables = simulate_chip(dataclasses.replace(cfg, workload=params)).tables
    part = params.partitions[0]
    stage = part.slots[0].cycles
    assert all(s.cycles == stage for s in part.slots)
    # a tile moves from stage to stage: the write's packet, the MU writing it, the waiting
    # read served (access + block-table lookup + port), the response's packet
    sizing = cfg.sizing
    transfers = []
    for b, buf in enumerate(part.buffers):
        (st,) = buf.stripes
        reader = next(s.cu for s in part.slots if any(r.buffer == b for r in s.reads))
        hw = abs(st.writer // SPEC.cols - st.mu // SPEC.cols) + abs(st.writer % SPEC.cols - st.mu % SPEC.cols)
        hr = abs(reader // SPEC.cols - st.mu // SPEC.cols) + abs(reader % SPEC.cols - st.mu % SPEC.cols)
        port = -(-st.tile_bytes // SPEC.mu_bytes_per_cycle)
        transfers.append(NI_LATENCY + _latency(hw, st.tile_bytes, sizing.header_bits, sizing.ref_bits) + port
                         + SPEC.mu_access_latency + SPEC.translation_latency + port
                         + _latency(hr, st.tile_bytes, sizing.header_bits, 0))
    span = tables["kernels"]["end"][-1] - tables["kernels"]["start"][0]
    assert span == (n + k - 1) * stage + sum(transfers)


def test_partitions_follow_each_other_and_make_up_the_run():
    g = chain([Kernel("a", EW, 2048, 1, 256), Kernel("b", GW, 512, 2048, 256), Kernel("c", EW, 512, 1, 256)])
    plan = plan_of(g, 256, 32, kernel_by_kernel=True)  # one partition per kernel: tensors spill to DRAM
    assert len(plan.partitions) == 3
    done = run_plan(plan)
    s, tables, results = done.summary, done.tables, done.simulation.outcome.reports
    parts = tables["partitions"]
    assert parts["status"] == ["ok"] * len(parts["status"])
    from sim.chip.records import PartitionRecord

    recs = sorted((x for r in results for x in r.logged if isinstance(x, PartitionRecord)), key=lambda x: x.start)
    assert all(a.end == b.start for a, b in zip(recs, recs[1:]))  # the next starts when the last CU reports
    total = sum(parts["simulated_seconds"])
    assert total == pytest.approx((recs[-1].end - recs[0].start) / SPEC.clock_hz)
    assert total <= s["sim_seconds"] < total + 1e-7  # then the buffers are freed
    assert s["seconds_per_pass_simulated"] == pytest.approx(total)
    assert s["completed"] and s["leaks"] == 0 and s["use_after_free"] == 0

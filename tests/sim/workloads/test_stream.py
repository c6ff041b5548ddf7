"""The stream workload against its closed form: weights streamed from a memory tier at its
bandwidth, a compute-bound product at the CUs' peak, a copy between tiers at the slower one."""

import pytest

from cluster.config.loader import ConfigError
from tests.sim.chip.chiprun import config, run

SMALL = {"preset": "sn40l", "rows": 8, "cols": 16}  # 64 CUs; HBM's 8 edge ports bind at 8 x 2048/33 B/cycle


def stream(**keys) -> dict:
    return {"chip": dict(SMALL), "run": {"max_cycles": 10**9},
            "workload": {"kind": "stream", "stream": {"chunk": 4096, **keys}}}


def test_the_closed_form_names_the_tightest_bandwidth():
    cfg = config(stream(matrices=[[4096, 1024]], batch=1))
    p, spec = cfg.workload, cfg.spec
    link = cfg.sizing.link_data_rate()
    # 8 MiB over the 8 ports of the HBM's edge (the tier's 1000 B/cycle is more than 8 x 62)
    assert p.memory_cycles == pytest.approx(4096 * 1024 * 2 / (spec.rows * link))
    assert p.compute_cycles == pytest.approx(2 * 4096 * 1024 / (64 * spec.cu_flops_per_cycle))


@pytest.mark.parametrize("batch, bound", [(1, "memory"), (256, "compute")])
def test_a_product_runs_at_its_roofline(batch, bound):
    """Memory-bound at one column, compute-bound at 256 (this grid's knee: 49.5 columns): the run
    takes max(bytes / bandwidth, FLOPs / peak) and a chunk's fill or drain more, within 5 %."""
    s = run(stream(matrices=[[4096, 1024]], batch=batch)).summary
    assert s["completed"]
    assert (s["roofline_compute_seconds"] > s["roofline_memory_seconds"]) == (bound == "compute")
    assert s["sim_seconds"] == pytest.approx(s["roofline_seconds"], rel=0.05)
    assert s["sim_seconds"] >= s["roofline_seconds"]


def test_a_copy_between_tiers_runs_at_the_slower_one():
    """A model switch: DDR (100 GB/s) into HBM; the copy crosses no NoC link."""
    s = run(stream(source="ddr", copy_to="hbm", matrices=[[1 << 23, 1]], cus=[[0, 0]], chunk=1 << 22)).summary
    ddr_cycles = (1 << 24) / 62.5
    assert s["ddr_read_bytes"] == s["hbm_write_bytes"] == 1 << 24
    assert s["roofline_seconds"] * 1.6e9 == pytest.approx(ddr_cycles)
    assert s["sim_seconds"] == pytest.approx(s["roofline_seconds"], rel=0.01)


def test_bad_sources_and_copies_are_named():
    with pytest.raises(ConfigError, match="workload.stream.copy_to"):
        config(stream(copy_to="hbm"))  # the source is the first tier, HBM itself
    with pytest.raises(ConfigError, match="workload.stream.source"):
        config(stream(source="flash"))
    with pytest.raises(ConfigError, match=r"workload.stream.cus\[0\]"):
        config(stream(cus=[[0, 1]]))  # an MU's tile

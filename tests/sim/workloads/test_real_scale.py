"""Issue 29's known answers on the sn40l at real size (benchmarks/real_scale.py prints them all):
Llama-3.1-8B's weights streamed from HBM at the HBM roofline, one socket's share of a batch-1
decode on 16 sockets at over 90 % of it (published: Kernel Looping; MICRO 2024), the 16 GB
model switch at 16 GB / 1.6 TB/s, and the GEMM knee where the closed form puts it."""

import pytest

from tests.paths import benchmark
from tests.sim.chip.chiprun import run

BENCH = benchmark("real_scale")  # Llama-3.1-8B's matrices (its config.json) and the cases' configs
SN40L = {"preset": "sn40l"}
HBM = 1.6e12  # bytes/s a socket (Hot Chips 2024)


def simulated(raw: dict) -> dict:
    s = run(raw).summary
    assert s["completed"]
    return s


def test_a_llama_layer_and_its_lm_head_stream_at_the_hbm_roofline():
    """A matrix-vector product over one layer's q, k, v, o, gate, up, down and the LM head
    (1.49 GB): every byte read from HBM once, in bytes / 1.6 TB/s (the 1,040 CUs' 40 edge ports
    carry 2.5 TB/s, so HBM binds), within 10 % (measured: 0.3 % over, the fill and drain)."""
    s = simulated(BENCH.stream(SN40L, matrices=BENCH.LAYER + [BENCH.LM_HEAD], batch=1, chunk=4 << 20))
    nbytes = 2 * sum(r * c for r, c in BENCH.LAYER + [BENCH.LM_HEAD])
    assert s["hbm_read_bytes"] == s["stream_bytes"] == nbytes
    assert s["roofline_memory_seconds"] == pytest.approx(nbytes / HBM)
    assert s["sim_seconds"] >= nbytes / HBM
    assert s["sim_seconds"] == pytest.approx(nbytes / HBM, rel=0.10)


def test_batch_one_decode_on_16_sockets_runs_at_over_90_percent_of_the_memory_roofline():
    """One socket's tensor-parallel sixteenth of every Llama-3.1-8B matrix (0.94 GB): published,
    decode at over 90 % of the memory roofline on 16 sockets; the weight stream alone (no
    all-reduce is simulated) must do at least that."""
    mats = BENCH.tensor_parallel_share(16)
    s = simulated(BENCH.stream(SN40L, matrices=mats, batch=1, chunk=1 << 20))
    assert s["stream_bytes"] == 2 * sum(r * c for r, c in mats)
    assert s["roofline_memory_seconds"] == pytest.approx(s["stream_bytes"] / HBM)
    assert s["roofline_memory_seconds"] / s["sim_seconds"] >= 0.90


def test_the_model_switch_on_a_16_socket_node_takes_16_gb_over_its_ddr_bandwidth():
    """Llama-3.1-8B (16.06 GB with its embedding) from DDR into HBM on sn40l-16: every socket
    copies its sixteenth at once, so the node takes one socket's copy; published about 0.01 s
    (Hot Chips 2024), the closed form 16.06 GB / (16 x 100 GB/s), within 5 %."""
    share = BENCH.MODEL_BYTES // 16
    s = simulated(BENCH.stream(SN40L, source="ddr", copy_to="hbm", matrices=[[share // 2, 1]], cus=[[0, 0]],
                               chunk=64 << 20))
    assert s["ddr_read_bytes"] == s["hbm_write_bytes"] == share
    node_seconds = BENCH.MODEL_BYTES / (16 * 100e9)
    assert s["sim_seconds"] == pytest.approx(node_seconds, rel=0.05)
    assert s["sim_seconds"] == pytest.approx(0.01, rel=0.05)  # the published figure


def test_the_gemm_knee_is_where_the_closed_form_puts_it():
    """Seconds against columns on 64 CUs: the memory asymptote (1 column) and the compute one
    (the slope between 128 and 256 columns) meet at peak / bandwidth x word / 2 columns (49.5
    on this grid, whose edge ports bind), within 5 %."""
    chip = BENCH.QUICK_CHIP
    runs = {b: simulated(BENCH.stream(chip, matrices=[[4096, 1024]], batch=b, chunk=4096)) for b in (1, 128, 256)}
    per_column = (runs[256]["sim_seconds"] - runs[128]["sim_seconds"]) / 128
    knee = runs[1]["sim_seconds"] / per_column
    s = runs[256]
    closed = s["roofline_memory_seconds"] / (s["roofline_compute_seconds"] / 256)
    assert closed == pytest.approx(49.5, abs=0.1)
    assert knee == pytest.approx(closed, rel=0.05)

"""moe-tiling (STeP's dynamic tiling) against known answers: the off-chip bytes of the artifact's
closed form to the byte on its four routing files as published, STeP's on-chip accounting
against the numbers its scripts printed, the allocator's reservations, and the time of a
memory-bound expert from its rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cluster.config import load
from cluster.config.loader import ConfigError
from cluster.config.run import RUN_SCHEMA, chip_config
from sim.workloads.moe_tiling import MoeTilingParams
from sim.workloads.routing_trace import step_file
from tests.paths import ROOT
from tests.sim.chip.chiprun import run

ROUTING = ROOT / "benchmarks" / "data" / "step" / "dyn_tiling" / "expert_routing"
FILES = {  # file: (experts, grid side: room for the scatters, a combiner and 3 CUs per active expert)
    "mixtral_b64/008_010.npz": (8, 8),
    "qwen_b64/032_012.npz": (128, 20),
    "mixtral_b1024/019_009.npz": (8, 8),
    "qwen_b1024/022_016.npz": (128, 23),
}
TILES = {64: [8, 16, 32, 64, "dynamic"], 1024: [16, 32, 64, 128, 256, 512, 1024, "dynamic"]}  # Figs 9 and 10
FAST_B1024 = {16, 1024, "dynamic"}  # the other b1024 tiles run with -m slow (and in benchmarks/step_reproduction.py)


def raw(path: str, tile, side: int, experts: int, **keys) -> dict:
    tiling = {"routing": str(ROUTING / path), "experts": experts, "tile": tile, **keys}
    return {"chip": {"preset": "step", "rows": side, "cols": side}, "memory": {"offset_bits": 24},
            "workload": {"kind": "moe-tiling", "tiling": tiling}}


def closed_form(routes: np.ndarray, tile, d: int, f: int) -> int:
    """The artifact's off-chip bytes (bf16): 3 D F 2 sum_e ceil(n_e / T) + 3 B D 2 + 2 B k, where
    a dynamic tiling runs one tile per expert with tokens."""
    b, k = routes.shape
    n = np.bincount(routes.ravel())
    tiles = int((n > 0).sum()) if tile == "dynamic" else sum(math.ceil(x / tile) for x in n.tolist())
    return 3 * d * f * 2 * tiles + 3 * b * d * 2 + 2 * b * k


def _cases():
    for path, (experts, side) in FILES.items():
        batch = int(path.split("_b")[1].split("/")[0])
        for tile in TILES[batch]:
            slow = batch == 1024 and tile not in FAST_B1024
            yield pytest.param(path, tile, side, experts, id=f"{path.split('/')[0]}-{tile}",
                               marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("path,tile,side,experts", list(_cases()))
def test_offchip_bytes_are_the_closed_form_to_the_byte(path, tile, side, experts):
    """Every routing file as published, every tile size of Figs 9 and 10: the bytes the HBM tier
    moved are the artifact's closed form. D and F are cut (to 64 and 128, two weight chunks) so the
    suite stays quick; the benchmark checks the full dimensions."""
    d, f = 64, 128
    s = run(raw(path, tile, side, experts, hidden=d, expert_ffn=f)).summary
    assert s["status"] == "completed", s["status_detail"]
    moved = s["hbm_read_bytes"] + s["hbm_write_bytes"]
    assert moved == closed_form(step_file(ROUTING / path), tile, d, f)


# (off-chip bytes, on-chip bytes) the artifact's scripts printed, from the raw CSVs of an earlier
# version of it (its authors' fork, gina7484/step_artifact: dyn_tiling/<model>_b<batch>/*_combined.csv);
# tile 0 is dynamic
ARTIFACT = {
    "mixtral_b64/008_010.npz": (8, {16: (4229431552, 18915330), 64: (2820145408, 37789698),
                                    0: (2820145408, 18915330)}),
    "mixtral_b1024/019_009.npz": (8, {256: (3900706816, 113287170), 1024: (2843742208, 415277058),
                                      0: (2843742208, 113287170)}),
    "qwen_b64/032_012.npz": (128, {16: (680264704, 70799362), 64: (567018496, 141578242),
                                   0: (567018496, 59789314)}),
    "qwen_b1024/022_016.npz": (128, {256: (928006144, 587485186), 1024: (795885568, 2154057730),
                                     0: (795885568, 266620930)}),
}
DIMS = {8: dict(hidden=4096, expert_ffn=14336), 128: dict(hidden=2048, expert_ffn=768)}


@pytest.mark.parametrize("path", sorted(ARTIFACT))
def test_the_artifacts_own_traffic_and_onchip_figures(path):
    """Off-chip and on-chip bytes as the artifact's scripts printed them, to the byte: on-chip
    is its operators' ``on_chip_requirement()`` summed over the experts with tokens."""
    experts, want = ARTIFACT[path]
    routes = step_file(ROUTING / path)
    for tile, (offchip, onchip) in want.items():
        p = MoeTilingParams(routes=routes, experts=experts, tile=tile, **DIMS[experts])
        assert (p.offchip_bytes(), p.step_onchip_bytes()) == (offchip, onchip), tile


def test_the_published_onchip_ratio():
    """Mixtral-8x7B, batch 64 (the expert counts its script's comment gives): tile 32 takes 1.33x
    the on-chip bytes of dynamic tiling (Fig 9), tile 16 the same."""
    routes = step_file(ROUTING / "mixtral_b64/008_010.npz")
    assert np.bincount(routes.ravel()).tolist() == [13, 10, 17, 14, 17, 10, 24, 23]
    dyn = MoeTilingParams(routes=routes, tile=0).step_onchip_bytes()
    assert MoeTilingParams(routes=routes, tile=32).step_onchip_bytes() / dyn == pytest.approx(1.3326, abs=1e-4)
    assert MoeTilingParams(routes=routes, tile=16).step_onchip_bytes() == dyn


def _single_expert(tmp_path, n: int) -> str:
    path = tmp_path / "000_000.npz"
    np.savez(path, data=np.zeros((n, 1), dtype=np.int64))  # every token to expert 0, top-1
    return str(path)


@pytest.mark.parametrize("tile", [4, "dynamic"])
def test_the_allocator_reserves_static_tiles_whole_and_grows_dynamic_ones(tmp_path, tile):
    """One expert of 10 tokens (rows of 2 KiB), all in before its first tile computes: a static
    tile reserves its 4 rows at once, and the next one is gathered while it computes (two tiles
    held: the artifact's channel depth 2); the dynamic tile grows block by block to its 10 rows.
    With the fp32 accumulator of the rows a tile computes, that is the peak the MUs reserve."""
    d, n = 1024, 10
    r = raw(_single_expert(tmp_path, n), tile, 8, 1, hidden=d, expert_ffn=128)
    r["memory"]["block_bytes"] = 2048
    cfg = chip_config(load(RUN_SCHEMA, raw=r))
    s = run(r).summary
    assert s["status"] == "completed"
    rows, held = (n, 1) if tile == "dynamic" else (tile, 2)
    cap = len(cfg.spec.mu_tiles()) * cfg.spec.mu_bytes
    assert round(s["peak_mu_reserved"] * cap) == held * rows * d * 2 + rows * d * 4


def test_a_memory_bound_expert_takes_its_tiles_one_after_another(tmp_path):
    """One expert alone: its three loads each stream at the unit's 64 B/cycle (the tier's 1,024
    are not the bound), so a tile takes F / tile_f chunks of D x tile_f x 2 bytes at 64 B/cycle
    (compute, 2 x 4 x D x 64 / 4,096 cycles a chunk, hides under the next chunk's transfer), and
    the tiles run one after another: ceil(16 / 4) = 4 tiles."""
    d, f = 1024, 1024
    s = run(raw(_single_expert(tmp_path, 16), 4, 8, 1, hidden=d, expert_ffn=f)).summary
    per_tile = (f // 64) * (d * 64 * 2) / 64
    assert 4 * per_tile <= s["sim_cycles"] <= 4 * per_tile * 1.03


def test_bad_routing_and_tiles_are_reported_with_their_keys(tmp_path):
    bad = tmp_path / "001_002.npz"
    np.savez(bad, experts=np.zeros((4, 2), dtype=np.int64))
    cases = {
        "routing": (dict(routing=str(bad)), "an integer array 'data'"),
        "tile": (dict(tile="big"), "a whole number of rows"),
        "expert_ffn": (dict(expert_ffn=100), "not a multiple of tile_f"),
        "experts": (dict(experts=4), "names expert"),
    }
    for key, (keys, words) in cases.items():
        r = raw("mixtral_b64/008_010.npz", "dynamic", 8, 8)
        r["workload"]["tiling"].update(keys)
        with pytest.raises(ConfigError) as exc:
            chip_config(load(RUN_SCHEMA, raw=r))
        assert f"workload.tiling.{key}" in str(exc.value) and words in str(exc.value)
    small = raw("qwen_b64/032_012.npz", "dynamic", 8, 128)
    with pytest.raises(ConfigError, match="raise chip.rows and chip.cols"):
        chip_config(load(RUN_SCHEMA, raw=small))
    plasticine = raw("mixtral_b64/008_010.npz", "dynamic", 8, 8)
    plasticine["chip"] = {"preset": "plasticine"}
    with pytest.raises(ConfigError, match="no memory tier"):
        chip_config(load(RUN_SCHEMA, raw=plasticine))

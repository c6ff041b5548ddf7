"""attention-par (STeP's dynamic parallelisation) against known answers: the off-chip bytes to
the byte on the artifact's batches, a region streaming its tiles at its unit's rate, the dynamic
schedule as list scheduling, and the interleaved partition's head-of-line blocking worked out by
hand."""

from __future__ import annotations

import numpy as np
import pytest

from cluster.config import load
from cluster.config.loader import ConfigError
from cluster.config.run import RUN_SCHEMA, chip_config
from sim.workloads.decode_attention import read_lengths
from tests.paths import ROOT
from tests.sim.chip.chiprun import run

TRACES = ROOT / "benchmarks" / "data" / "step" / "dynamic_par" / "azure_trace"
TILE = 32 * 64 * 2  # a KV tile: 32 rows of 64 bf16
RATE = 64  # bytes a unit moves a cycle on preset step
PER_TILE = TILE // RATE
START = 300  # a sequence's start, at most: its query and key, its first tiles' round trip (cycles)
END = 300  # the batch's end after its last tile: the write-back and the output stored, acknowledged


def raw(schedule: str, **keys) -> dict:
    return {"chip": {"preset": "step", "cu_stages": 16},
            "workload": {"kind": "attention-par", "attention": {"schedule": schedule, **keys}}}


def lengths_of(tiles: list[int]) -> list[int]:
    """KV lengths whose caches (with the new token) take these many tiles."""
    return [32 * t - 1 for t in tiles]


def records(done) -> dict[int, tuple[int, int]]:
    return {r.ident: (r.start, r.end) for res in done.simulation.outcome.reports for r in res.records}


@pytest.mark.parametrize("schedule", ["coarse", "interleaved", "dynamic"])
def test_offchip_bytes_to_the_byte_on_a_published_batch(schedule):
    """conv_stdev1456_2805_2820 (batch 16): every K and V tile read (ceil((L + 1) / 32) each), the
    last of each written back, each sequence's 8 query heads and new key and value read and its
    8 output heads written, 128 B a head."""
    path = TRACES / "b16" / "conv_stdev1456_2805_2820.npy"
    lengths = read_lengths(path)
    s = run(raw(schedule, lengths_file=str(path))).summary
    assert s["status"] == "completed" and s["work_finished"] == 16
    tiles = int(((lengths + 32) // 32).sum())
    assert s["hbm_read_bytes"] == 2 * TILE * tiles + 16 * (8 + 2) * 128
    assert s["hbm_write_bytes"] == 16 * (2 * TILE + 8 * 128)


def test_a_region_streams_its_tiles_at_its_units_rate():
    """Coarse, 16 sequences: one region does them all, its K and V CUs each moving a 4 KiB tile
    in 64 cycles; what is left is each sequence's start (its query and key, the first tiles'
    round trip): under START cycles a sequence."""
    tiles = [40, 3, 17, 9, 60, 1, 25, 8, 12, 30, 5, 44, 2, 19, 7, 11]
    s = run(raw("coarse", lengths=lengths_of(tiles))).summary
    assert sum(tiles) * PER_TILE <= s["sim_cycles"] <= sum(tiles) * PER_TILE + START * len(tiles) + END


def test_dynamic_sends_each_next_sequence_to_the_first_region_free():
    """Two regions; sequence 0 is long (100 tiles), the rest short (43 tiles in all, and a start
    of under 300 cycles each): the first region free takes the next one, so region 1 takes every
    short sequence while region 0 works on sequence 0, and the batch ends with it."""
    tiles = [100, 10, 1, 10, 1, 10, 1, 10]
    done = run(raw("dynamic", lengths=lengths_of(tiles), regions=2))
    rec = records(done)
    assert all(rec[s][1] < rec[0][1] for s in range(1, len(tiles)))  # all done on region 1 meanwhile
    assert 100 * PER_TILE <= done.summary["sim_cycles"] <= 100 * PER_TILE + START + END


def test_interleaved_partition_blocks_every_region_behind_a_full_one():
    """Two regions, interleaved: region 0 gets sequences 0, 2, 4, 6 (100 tiles, then 1 each),
    region 1 gets 1, 3, 5, 7 (30 tiles each). A region holds one sequence (a FIFO of depth 1,
    its element kept until the region is done with it), so the partition, holding sequence 2 for
    busy region 0, cannot send 3 to region 1 until region 0 has read sequence 0: region 1 idles
    from about 30 tiles' time to 100, then does 3, 5 and 7 (region 0 gives each of 4 and 6 up
    within a tile): about 190 tiles' time. With FIFOs deeper than the batch nothing blocks:
    region 1's 120 tiles set the time."""
    tiles = [100, 30, 1, 30, 1, 30, 1, 30]
    blocked = run(raw("interleaved", lengths=lengths_of(tiles), regions=2))
    free = run(raw("interleaved", lengths=lengths_of(tiles), regions=2, channel_depth=16))
    rec = records(blocked)
    assert rec[3][0] > rec[0][0] + 100 * PER_TILE  # sequence 3 waited for sequence 0's K tiles
    assert 190 * PER_TILE <= blocked.summary["sim_cycles"] <= 190 * PER_TILE + 4 * START + END
    assert 120 * PER_TILE <= free.summary["sim_cycles"] <= 120 * PER_TILE + 4 * START + END


def test_coarse_groups_wrap_over_the_regions():
    """80 sequences in groups of 16 over at most 4 regions (the artifact's batch-80 coarse run):
    region 0 takes groups 0 and 4, so the batch lasts as long as its 32 sequences."""
    tiles = [5] * 80
    s = run(raw("coarse", lengths=lengths_of(tiles))).summary
    assert 32 * 5 * PER_TILE <= s["sim_cycles"] <= 32 * 5 * PER_TILE + START * 32 + END


def test_bad_lengths_are_reported_with_their_keys(tmp_path):
    bad = tmp_path / "conv_stdev0001_0000_0003.npy"
    np.save(bad, np.zeros((2, 2), dtype=np.int64))
    for keys, key, words in [(dict(lengths_file=str(bad)), "lengths_file", "1-D integer array"),
                             (dict(), "lengths_file", "required"),
                             (dict(lengths=[3], lengths_file=str(bad)), "lengths", "not both")]:
        with pytest.raises(ConfigError) as exc:
            chip_config(load(RUN_SCHEMA, raw=raw("dynamic", **keys)))
        assert f"workload.attention.{key}" in str(exc.value) and words in str(exc.value)
    with pytest.raises(ConfigError, match="needs 65 CUs"):
        chip_config(load(RUN_SCHEMA, raw=raw("dynamic", lengths=[3], regions=32)))

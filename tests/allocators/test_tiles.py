"""NKI-style tile allocation (ISA and memory rules, modulo mapping) and the lifetime-conflict checker."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocators.errors import InputError
from allocators.tile_conflicts import LiveTile, find_conflicts
from allocators.tiles import (
    PhysicalTile,
    SbufSpec,
    legal_start_partitions,
    mod_alloc,
    psum_alloc,
    psum_mod_alloc,
    sbuf_alloc,
)


@pytest.mark.parametrize("partitions,starts", [
    (1, (0, 32, 64, 96)), (32, (0, 32, 64, 96)), (33, (0, 64)), (64, (0, 64)), (65, (0,)), (128, (0,))])
def test_start_partition_rules(partitions, starts):
    assert legal_start_partitions(partitions) == starts


def test_double_buffering_example_of_the_vendor_guide():
    # (4, par_dim(128), 512) bf16 with num_free_tiles=(2,): tiles alternate between bytes 0 and 1024
    tiles = sbuf_alloc("t", (4,), 128, 512 * 2, mod_alloc(base_addr=0, num_free_tiles=(2,)))
    assert [(t.start_partition, t.byte_addr) for t in tiles] == [(0, 0), (0, 1024), (0, 0), (0, 1024)]


def test_partition_tiles_step_by_the_tile_height():
    func = mod_alloc(base_addr=64, base_partition=0, num_par_tiles=(4, 1), num_free_tiles=(1, 2))
    tiles = sbuf_alloc("t", (4, 2), 32, 256, func)
    assert {(t.index, t.start_partition, t.byte_addr) for t in tiles} == {
        ((i, j), 32 * i, 64 + 256 * j) for i in range(4) for j in range(2)}


def test_illegal_mappings_name_the_tile():
    with pytest.raises(InputError, match=r"tile \(1,\).*start partition 32 is illegal for a 64-partition"):
        sbuf_alloc("t", (2,), 64, 128, lambda idx, p, f: (32 * idx[0], 0))
    with pytest.raises(InputError, match="reserved tail"):
        sbuf_alloc("t", (1,), 128, 1024, lambda idx, p, f: (0, SbufSpec().usable_bytes - 512))
    with pytest.raises(InputError, match="multiple of 32"):
        sbuf_alloc("t", (1,), 128, 1024, lambda idx, p, f: (0, 16))
    with pytest.raises(InputError, match="cross the 2048-byte bank"):
        psum_alloc("acc", (1,), 128, 2048, lambda idx, p, f: (0, 0, 512))
    with pytest.raises(InputError, match="bank 8 outside"):
        psum_alloc("acc", (9,), 128, 2048, psum_mod_alloc(base_bank=0, num_bank_tiles=(9,)))


def test_psum_tiles_rotate_over_banks_and_compare_by_global_address():
    tiles = psum_alloc("acc", (4,), 128, 2048, psum_mod_alloc(base_bank=2, num_bank_tiles=(2,)))
    assert [t.bank for t in tiles] == [2, 3, 2, 3]
    assert [t.byte_addr for t in tiles] == [4096, 6144, 4096, 6144]


def test_vendor_example_of_partially_overlapping_tensors_is_a_conflict():
    t0 = sbuf_alloc("t0", (4,), 128, 1024, mod_alloc(base_addr=0, num_free_tiles=(2,)))
    t1 = sbuf_alloc("t1", (4,), 128, 1024, mod_alloc(base_addr=1024, num_free_tiles=(2,)))
    live = [LiveTile(t, 0, 10) for t in t0[:2] + t1[:2]]
    found = find_conflicts(live)
    # t0[1] and t1[0] both occupy bytes [1024, 2048)
    assert [(c.first.tensor, c.first.index, c.second.tensor, c.second.index) for c in found] == [
        ("t0", (1,), "t1", (0,))]
    assert found[0].bytes == (1024, 2048) and found[0].partitions == (0, 128) and found[0].time == (0, 10)
    assert "t0[1] and t1[0]" in found[0].describe()


def test_too_few_physical_tiles_for_the_live_logical_tiles():
    # eight logical tiles loaded in one loop and all consumed in the next: two physical tiles are not enough
    tiles = sbuf_alloc("t", (8,), 128, 1024, mod_alloc(base_addr=0, num_free_tiles=(2,)))
    loop = [LiveTile(t, i, 8 + i + 1) for i, t in enumerate(tiles)]
    pairs = {(c.first.index[0], c.second.index[0]) for c in find_conflicts(loop)}
    assert pairs == {(i, j) for i in range(8) for j in range(i + 1, 8) if i % 2 == j % 2}
    # rotating through them, each dead before its successor is loaded: no conflict
    rotating = [LiveTile(t, i, i + 2) for i, t in enumerate(tiles)]
    assert find_conflicts(rotating) == []


def _cells(lt: LiveTile):
    t = lt.tile
    return {(t.memory, time, p, b) for time in range(lt.start, lt.end)
            for p in range(t.start_partition, t.start_partition + t.partitions)
            for b in range(t.byte_addr, t.byte_addr + t.size)}


@st.composite
def live_tiles(draw):
    out = []
    for i in range(draw(st.integers(0, 7))):
        parts = draw(st.sampled_from([8, 32, 40, 64, 100]))
        start_p = draw(st.sampled_from(legal_start_partitions(parts)))
        if start_p + parts > 128:
            start_p = 0
        tile = PhysicalTile(draw(st.sampled_from(["SBUF", "PSUM"])), f"x{i}", (i,), start_p, parts,
                            draw(st.integers(0, 12)), draw(st.integers(1, 5)))
        start = draw(st.integers(0, 6))
        out.append(LiveTile(tile, start, start + draw(st.integers(1, 4))))
    return out


@settings(max_examples=150, deadline=None)
@given(live_tiles())
def test_checker_reports_exactly_the_pairs_sharing_a_cell_at_a_common_time(live):
    expected = {(i, j) for i, j in itertools.combinations(range(len(live)), 2) if _cells(live[i]) & _cells(live[j])}
    found = find_conflicts(live)
    got = {tuple(sorted((c.first.index[0], c.second.index[0]))) for c in found}
    assert got == expected and len(found) == len(expected)
    for c in found:  # the reported region is shared and maximal in each dimension
        a, b = live[c.first.index[0]], live[c.second.index[0]]
        shared = _cells(a) & _cells(b)
        assert c.time == (min(x[1] for x in shared), max(x[1] for x in shared) + 1)
        assert c.partitions == (min(x[2] for x in shared), max(x[2] for x in shared) + 1)
        assert c.bytes == (min(x[3] for x in shared), max(x[3] for x in shared) + 1)


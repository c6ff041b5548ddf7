"""Cutting the grid into shards: every router owned exactly once, near-equal shards, and the lookahead of the cut."""

import itertools

import numpy as np
import pytest

from cluster.errors import UserError
from cluster.jobs.grid import DEFAULT_EPOCH, cut_grid, cut_links, epoch_length, owner_map
from sim.noc.params import NocParams


def _cuts(rows: int, cols: int):
    """Every (shards, cut) a rows x cols grid allows, by the definition of each shape."""
    for shards in range(1, rows * cols + 1):
        if shards <= rows:
            yield shards, "rows"
        if shards <= cols:
            yield shards, "cols"
        if any(shards % a == 0 and a <= rows and shards // a <= cols for a in range(1, shards + 1)):
            yield shards, "blocks"


@pytest.mark.parametrize("rows,cols", [(1, 2), (2, 2), (3, 5), (4, 4), (5, 3), (6, 4), (7, 7)])
def test_the_shards_cover_every_router_exactly_once(rows, cols):
    for shards, cut in _cuts(rows, cols):
        regions = cut_grid(rows, cols, shards, cut)
        assert len(regions) == shards
        hits = np.zeros(rows * cols, dtype=int)
        for reg in regions:
            assert 0 <= reg.row0 < reg.row1 <= rows and 0 <= reg.col0 < reg.col1 <= cols  # no empty shard
            np.add.at(hits, reg.routers(cols), 1)
        assert (hits == 1).all(), (rows, cols, shards, cut)
        owner = owner_map(regions, rows, cols)
        assert set(owner.tolist()) == set(range(shards))


@pytest.mark.parametrize("rows,cols", [(4, 4), (5, 7), (7, 7), (10, 3)])
def test_band_heights_and_widths_differ_by_at_most_one(rows, cols):
    for shards, cut in _cuts(rows, cols):
        regions = cut_grid(rows, cols, shards, cut)
        heights = {r.row1 - r.row0 for r in regions}
        widths = {r.col1 - r.col0 for r in regions}
        assert max(heights) - min(heights) <= 1 and max(widths) - min(widths) <= 1, (shards, cut)


@pytest.mark.parametrize("rows,cols,shards,bands", [
    (8, 8, 4, (2, 2)),  # square grid, square blocks
    (6, 4, 6, (3, 2)),  # 2 x 2 blocks exactly
    (4, 16, 4, (1, 4)),  # a wide grid is cut into columns
    (16, 4, 4, (4, 1)),
    (3, 3, 3, (1, 3)),  # a tie of aspects: the fewer row bands
])
def test_blocks_are_as_square_as_the_grid_allows(rows, cols, shards, bands):
    regions = cut_grid(rows, cols, shards, "blocks")
    assert (len({r.row0 for r in regions}), len({r.col0 for r in regions})) == bands


@pytest.mark.parametrize("args,words", [
    ((4, 4, 0, "rows"), "run.shards must be at least 1"),
    ((4, 4, 2, "diagonal"), "run.cut 'diagonal' is not one of rows, cols, blocks"),
    ((3, 8, 4, "rows"), "cannot cut 3 rows into 4 row bands"),
    ((8, 3, 4, "cols"), "cannot cut 3 columns into 4 column bands"),
    ((4, 4, 7, "blocks"), "cannot cut a 4x4 grid into 7 blocks"),
])
def test_an_impossible_cut_is_a_one_line_error(args, words):
    with pytest.raises(UserError, match=words):
        cut_grid(*args)


@pytest.mark.parametrize("topology,rows,cols,shards,cut,links", [
    ("mesh", 4, 4, 2, "rows", 8),  # one boundary: 4 columns x 2 directions
    ("mesh", 4, 4, 4, "cols", 24),  # three boundaries x 4 rows x 2 directions
    ("mesh", 4, 4, 4, "blocks", 16),  # a horizontal and a vertical boundary, 4 links each way
    ("torus", 4, 4, 2, "rows", 16),  # the wrap-around links are a second boundary
    ("torus", 2, 3, 2, "rows", 12),  # two rows on a ring: the direct and the wrap link, both ways, per column
    ("mesh", 4, 4, 1, "rows", 0),
])
def test_cut_links_by_hand_count(topology, rows, cols, shards, cut, links):
    p = NocParams(rows=rows, cols=cols, topology=topology)
    regions = cut_grid(rows, cols, shards, cut)
    found = cut_links(p, regions)
    assert len(found) == links
    owner = owner_map(regions, rows, cols)
    for link in found:
        assert link.src_shard == owner[link.src] != link.dst_shard == owner[link.dst]
    assert len({(c.src, c.dst, c.port) for c in found}) == links  # each directed link once


# lookahead = min(switch allocation + traversal + link, link + 1 + credit delay)
@pytest.mark.parametrize("timing,lookahead", [
    ({}, 3),  # 1 + 1 + 1 and 1 + 1 + 1
    ({"link_latency": 5}, 7),  # 1 + 1 + 5 and 5 + 1 + 1
    ({"sw_alloc_delay": 4}, 3),  # the credit's 3 beats the flit's 6
    ({"credit_delay": 0}, 2),
    ({"link_latency": 2, "sw_alloc_delay": 3}, 4),  # flit 3 + 1 + 2 = 6, credit 2 + 1 + 1 = 4
])
def test_the_epoch_is_the_lookahead_of_the_tightest_cut_link(timing, lookahead):
    p = NocParams(rows=4, cols=4, **timing)
    regions = cut_grid(4, 4, 2, "rows")
    assert {c.lookahead for c in cut_links(p, regions)} == {lookahead}
    assert epoch_length(p, regions, None) == (lookahead, lookahead)
    assert epoch_length(p, regions, lookahead) == (lookahead, lookahead)
    assert epoch_length(p, regions, 1) == (1, lookahead)  # shorter is always safe


def test_an_epoch_longer_than_the_lookahead_names_the_link_and_the_bound():
    p = NocParams(rows=4, cols=4)
    with pytest.raises(UserError, match=r"run.epoch = 4 cycles is longer than the lookahead of link \(1,0\)->\(2,0\)"
                                        r" \[S\] from shard 0 to shard 1: 3 cycles.*run.epoch <= 3"):
        epoch_length(p, cut_grid(4, 4, 2, "rows"), 4)
    with pytest.raises(UserError, match="run.epoch must be at least 1"):
        epoch_length(p, cut_grid(4, 4, 2, "rows"), 0)


def test_one_shard_has_no_lookahead_and_any_epoch():
    p = NocParams(rows=4, cols=4)
    one = cut_grid(4, 4, 1)
    assert epoch_length(p, one, None) == (DEFAULT_EPOCH, None)
    assert epoch_length(p, one, 10_000) == (10_000, None)


def test_every_router_pair_across_a_boundary_is_a_cut_link():
    """Brute force on a 5 x 6 mesh: a link is cut iff its ends are neighbours owned by different shards."""
    rows, cols = 5, 6
    p = NocParams(rows=rows, cols=cols)
    for shards, cut in [(2, "rows"), (3, "cols"), (6, "blocks")]:
        owner = owner_map(cut_grid(rows, cols, shards, cut), rows, cols)
        expected = set()
        for (r, c), (dr, dc) in itertools.product(itertools.product(range(rows), range(cols)),
                                                  [(0, 1), (0, -1), (1, 0), (-1, 0)]):
            if 0 <= r + dr < rows and 0 <= c + dc < cols:
                a, b = r * cols + c, (r + dr) * cols + c + dc
                if owner[a] != owner[b]:
                    expected.add((a, b))
        assert {(c.src, c.dst) for c in cut_links(p, cut_grid(rows, cols, shards, cut))} == expected

"""Each MU memory policy on its own: known answers for reservations, growth, copies, limits."""

import pytest

from sim.memory.policies import MuGeometry, policy_params

KIB = 1024


def make(policy: str, capacity: int, **keys):
    """The storage of one MU of ``capacity`` bytes under ``policy`` with these config keys."""
    return policy_params(policy, **keys).storage(MuGeometry(capacity))


def test_static_single_holds_one_buffer_of_the_whole_mu():
    s = make("static-single", 64 * KIB)
    assert s.create(1, 100).reserved == 64 * KIB
    assert s.create(2, 100) is None  # one buffer per MU, however small
    assert s.grow(1, 64 * KIB).reserved == 0
    assert s.grow(1, 64 * KIB + 1) is None  # a static buffer never grows
    s.release(1)
    assert s.create(2, 100) is not None and s.reserved == 64 * KIB


def test_static_multi_packs_fixed_size_buffers_first_fit():
    s = make("static-multi", 64 * KIB, buffers_per_mu=4)
    starts = []
    for b in range(4):
        assert s.create(b, 1).reserved == 16 * KIB
        starts.append(s.start[b])
    assert starts == [0, 16 * KIB, 32 * KIB, 48 * KIB]
    assert s.create(9, 1) is None
    s.release(1)
    s.create(9, 1)
    assert s.start[9] == 16 * KIB  # first fit reuses the lowest hole
    assert s.create(10, 16 * KIB + 1) is None  # larger than the fixed size


def test_realloc_copy_grows_geometrically_and_copies_the_contents():
    s = make("realloc-copy", 256 * KIB, initial_bytes=4 * KIB, growth=2.0)
    s.create(1, 0)
    copied, size, moves = 0, 0, 0
    for _ in range(100):  # append 1 KiB at a time up to 100 KiB
        size += KIB
        g = s.grow(1, size)
        if g.copy_bytes:
            moves += 1
            copied += g.copy_bytes
            # both regions are reserved during the copy
            assert s.reserved == s.cap[1] + s.old[g.old_start]
            s.copy_done(g.old_start)
        s.set_size(1, size)
    # regions 4, 8, 16, 32, 64, 128 KiB: five moves, each copying what the old region held
    assert moves == 5 and s.cap[1] == 128 * KIB
    assert copied == (4 + 8 + 16 + 32 + 64) * KIB
    assert s.reserved == 128 * KIB and s.used == 100 * KIB


def test_realloc_copy_runs_out_when_no_contiguous_region_is_large_enough():
    s = make("realloc-copy", 64 * KIB, initial_bytes=16 * KIB, growth=2.0)
    for b in range(4):
        s.create(b, 0)
    s.release(1)
    s.release(3)
    assert s.external_fragmentation() == 0.5  # 32 KiB free in two 16 KiB holes
    assert s.grow(0, 17 * KIB) is None  # needs 32 KiB contiguous


def test_virtual_grows_block_by_block_and_shrinks():
    s = make("virtual", 64 * KIB, block_bytes=4 * KIB)
    assert s.create(1, 0).reserved == 0
    assert s.grow(1, 1).reserved == 4 * KIB
    assert s.grow(1, 4 * KIB).reserved == 0
    assert s.grow(1, 4 * KIB + 1).reserved == 4 * KIB
    assert s.grow(1, 64 * KIB).reserved == 14 * 4 * KIB  # every remaining block
    assert s.create(2, 1) is None
    assert s.shrink(1, 10 * KIB) == 13 * 4 * KIB  # keeps ceil(10/4) = 3 blocks
    assert s.reserved == 12 * KIB and s.external_fragmentation() == 0.0


def test_virtual_block_table_entries_bound_the_mapped_blocks():
    s = make("virtual", 64 * KIB, block_bytes=4 * KIB, block_table_entries=5)
    s.create(1, 12 * KIB)
    s.create(2, 8 * KIB)
    assert s.grow(1, 16 * KIB) is None  # 16 blocks free, but all 5 entries are in use
    s.release(2)
    assert s.grow(1, 20 * KIB) is not None


@pytest.mark.parametrize("policy", ["static-single", "static-multi", "realloc-copy", "virtual"])
def test_used_and_reserved_return_to_zero(policy):
    s = make(policy, 64 * KIB)
    s.create(1, 1000)
    s.grow(1, 3000)
    s.set_size(1, 3000)
    assert s.used == 3000 and s.reserved >= 3000
    s.release(1)
    assert s.used == 0 and s.reserved == 0 and s.buffers() == 0

"""Paged blocks (block tables, copy-on-write, metadata widths) and weighted reference counting."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from allocators.errors import AllocatorError, InputError, OutOfMemoryError
from allocators.paged import BlockPool, PagedLayout
from allocators.weights import STRATEGIES, WeightedBuffer


def test_plasticine_field_widths_from_the_seed_proposal():
    # 256 KiB scratchpad, 4-byte words, 1 KiB blocks: 256 blocks (8 bits) of 256 words (8 bits)
    layout = PagedLayout(capacity=256 << 10, block_size=1024, word_bytes=4)
    assert (layout.blocks, layout.block_bits, layout.offset_bits) == (256, 8, 8)
    assert layout.physical_bits == 16  # "physical block + offset 16"
    assert layout.reference_bits == 6 + 16 + 16
    assert layout.max_blocks_per_buffer == 256


def test_metadata_counts_free_list_tables_and_counters():
    pool = BlockPool(PagedLayout(capacity=64 * 128, block_size=128), copy_on_write=True, refcount_bits=8)
    pool.create(1, 3)
    pool.copy(1, 2)  # shares the three blocks
    md = pool.metadata()
    assert md.free_list_bits == 61 * 6 and md.block_table_bits == 6 * 6
    assert md.refcount_bits == (2 + 3) * 8 and md.reference_bits == 38
    assert md.total_bytes == -(-(61 * 6 + 36 + 40) // 8)


def test_copy_on_write_copies_only_the_written_block():
    pool = BlockPool(PagedLayout(capacity=8 * 64, block_size=64), copy_on_write=True)
    pool.create(1, 2)
    pool.copy(1, 2)
    assert pool.used_blocks == 2 and pool.tables[1] == pool.tables[2]
    fresh = pool.write(2, 1)
    assert fresh not in pool.tables[1] and pool.tables[2][0] == pool.tables[1][0]
    assert pool.copies == 1 and pool.used_blocks == 3
    assert pool.write(2, 1) == fresh and pool.copies == 1  # now private: no second copy
    pool.free(1)
    assert pool.used_blocks == 2  # the shared block survives for buffer 2
    pool.check()


def test_pool_errors():
    pool = BlockPool(PagedLayout(capacity=4 * 64, block_size=64))
    pool.create(1, 3)
    with pytest.raises(OutOfMemoryError, match="block request of 128 B"):
        pool.create(2, 2)
    assert 2 not in pool.tables and pool.used_blocks == 3  # nothing half-made
    with pytest.raises(AllocatorError, match="virtual block 5"):
        pool.translate(1, 5)
    with pytest.raises(InputError):
        PagedLayout(capacity=100, block_size=6)
    assert pool.address(1, 70) == pool.tables[1][1] * 64 + 6


class PoolMachine(RuleBasedStateMachine):
    """Random create/extend/truncate/copy/write/retain/release against a model of contents."""

    @initialize(cow=st.booleans())
    def setup(self, cow):
        self.pool = BlockPool(PagedLayout(capacity=16 * 32, block_size=32), copy_on_write=cow)
        self.holders: dict[int, int] = {}
        self.lengths: dict[int, int] = {}
        self.next_id = 0

    def _new_id(self):
        self.next_id += 1
        return self.next_id

    @rule(blocks=st.integers(0, 6))
    def create(self, blocks):
        b = self._new_id()
        if blocks > len(self.pool.free_blocks):
            with pytest.raises(OutOfMemoryError):
                self.pool.create(b, blocks)
            return
        self.pool.create(b, blocks)
        self.holders[b], self.lengths[b] = 1, blocks

    @precondition(lambda self: self.holders)
    @rule(data=st.data(), blocks=st.integers(1, 4))
    def extend(self, data, blocks):
        b = data.draw(st.sampled_from(sorted(self.holders)))
        if blocks > len(self.pool.free_blocks):
            with pytest.raises(OutOfMemoryError):
                self.pool.extend(b, blocks)
            return
        self.pool.extend(b, blocks)
        self.lengths[b] += blocks

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def truncate(self, data):
        b = data.draw(st.sampled_from(sorted(self.holders)))
        keep = data.draw(st.integers(0, self.lengths[b]))
        self.pool.truncate(b, keep)
        self.lengths[b] = keep

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def copy(self, data):
        src = data.draw(st.sampled_from(sorted(self.holders)))
        dst = self._new_id()
        need = 0 if self.pool.copy_on_write else self.lengths[src]
        if need > len(self.pool.free_blocks):
            with pytest.raises(OutOfMemoryError):
                self.pool.copy(src, dst)
            return
        self.pool.copy(src, dst)
        self.holders[dst], self.lengths[dst] = 1, self.lengths[src]

    @precondition(lambda self: any(self.lengths.values()))
    @rule(data=st.data())
    def write(self, data):
        b = data.draw(st.sampled_from(sorted(k for k, v in self.lengths.items() if v)))
        v = data.draw(st.integers(0, self.lengths[b] - 1))
        shared = sum(t.count(self.pool.tables[b][v]) for t in self.pool.tables.values()) > 1
        if shared and not self.pool.free_blocks:
            with pytest.raises(OutOfMemoryError):
                self.pool.write(b, v)
            return
        block = self.pool.write(b, v)
        assert sum(t.count(block) for t in self.pool.tables.values()) == 1  # written blocks are private

    @precondition(lambda self: self.holders)
    @rule(data=st.data(), retain=st.booleans())
    def retain_or_release(self, data, retain):
        b = data.draw(st.sampled_from(sorted(self.holders)))
        if retain:
            self.pool.retain(b)
            self.holders[b] += 1
        else:
            freed = self.pool.release(b)
            self.holders[b] -= 1
            assert freed == (self.holders[b] == 0)
            if freed:
                del self.holders[b], self.lengths[b]

    @invariant()
    def consistent(self):
        self.pool.check()
        assert {b: len(t) for b, t in self.pool.tables.items()} == self.lengths
        mapped = {blk for t in self.pool.tables.values() for blk in t}
        assert len(mapped) + len(self.pool.free_blocks) == self.pool.layout.blocks


TestPoolAgainstModel = PoolMachine.TestCase
TestPoolAgainstModel.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(STRATEGIES), st.integers(2, 6), st.lists(st.tuples(st.booleans(), st.integers(0, 99)),
                                                                 max_size=60))
def test_weight_is_conserved_and_the_buffer_is_freed_exactly_when_the_last_reference_goes(strategy, bits, ops):
    w = WeightedBuffer(bits, strategy)
    live = [w.create()]
    drops = 0
    for is_copy, pick in ops:
        if not live:
            break
        holder = live[pick % len(live)]
        if is_copy:
            before = holder.weight
            live.append(w.copy(holder))
            assert holder.weight >= 1 and live[-1].weight >= 1
            if strategy == "log2":
                assert all(r.weight & (r.weight - 1) == 0 for r in (holder, live[-1]))
            if before > 1:
                assert holder.weight + live[-1].weight == before  # a split sends no message
        else:
            live.remove(holder)
            drops += 1
            assert w.drop(holder) == (not live)
        w.check()
        assert w.out == sum(r.weight for r in live)
        assert all(r.weight <= w.max_weight for r in live)
    assert w.messages == drops + 2 * w.borrows
    assert w.freed == (not live)


def test_unsplittable_weight_borrows_from_the_owner():
    w = WeightedBuffer(bits=2, strategy="halve")  # total weight 2
    a = w.create()
    b = w.copy(a)  # 1 and 1
    assert (a.weight, b.weight, w.messages) == (1, 1, 0)
    c = w.copy(a)  # a cannot split 1: borrows up to 2, then halves
    assert (a.weight, c.weight, w.borrows, w.messages, w.out) == (1, 1, 1, 2, 3)
    for r in (a, b, c):
        w.drop(r)
    assert w.freed and w.messages == 5
    with pytest.raises(AllocatorError, match="after the buffer was freed"):
        w.copy(a)


def test_one_unit_strategy_and_log2_field_widths():
    one = WeightedBuffer(bits=4, strategy="one")
    holder = one.create()
    refs = [one.copy(holder) for _ in range(7)]
    assert holder.weight == 1 and [r.weight for r in refs] == [1] * 7
    assert one.borrows == 0 and WeightedBuffer(bits=3, strategy="log2").total_weight == 2 ** 7
    with pytest.raises(InputError):
        WeightedBuffer(bits=1, strategy="halve")

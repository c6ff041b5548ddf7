"""Free list against a byte-exact model of memory: placement rule, coalescing, statistics, errors."""

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from allocators.errors import AllocatorError, InputError, OutOfMemoryError
from allocators.freelist import FreeList
from tests.allocators.oracles import MemoryModel


def expected_address(runs, need, policy, top_down):
    """Where the policy must put a ``need``-byte block among the model's free runs (None: no room)."""
    fitting = [(lo, hi) for lo, hi in runs if hi - lo >= need]
    if not fitting:
        return None
    if policy == "best_fit":
        smallest = min(hi - lo for lo, hi in fitting)
        fitting = [(lo, hi) for lo, hi in fitting if hi - lo == smallest]
    lo, hi = fitting[-1] if top_down else fitting[0]
    return hi - need if top_down else lo


class FreeListMachine(RuleBasedStateMachine):
    @initialize(policy=st.sampled_from(FreeList.POLICIES), base=st.integers(0, 20),
                size=st.integers(64, 400), alignment=st.sampled_from([1, 2, 8, 16]),
                min_allocation=st.sampled_from([0, 1, 24]))
    def setup(self, policy, base, size, alignment, min_allocation):
        self.fl = FreeList(size, base, alignment, min_allocation, policy=policy)
        self.policy, self.alignment, self.min_allocation = policy, alignment, min_allocation
        self.model = MemoryModel(self.fl.start, self.fl.end)
        assert self.fl.start % alignment == 0 and self.fl.end % alignment == 0
        assert base <= self.fl.start < base + alignment and base + size - alignment < self.fl.end <= base + size

    def need(self, size):
        raw = max(size, self.min_allocation)
        return -(-raw // self.alignment) * self.alignment

    @rule(size=st.integers(1, 120), top_down=st.booleans())
    def allocate(self, size, top_down):
        need = self.need(size)
        runs = self.model.free_runs(self.fl.floor)
        want = expected_address(runs, need, self.policy, top_down)
        if want is None:
            with pytest.raises(OutOfMemoryError) as err:
                self.fl.allocate(size, top_down)
            free = sum(hi - lo for lo, hi in runs)
            largest = max((hi - lo for lo, hi in runs), default=0)
            e = err.value
            assert (e.request, e.per_bank, e.free, e.largest_free) == (size, need, free, largest)
            assert e.fragmented == (free >= need)
            assert str(size) in str(e) and str(largest) in str(e)
        else:
            assert self.fl.allocate(size, top_down) == want
            self.model.owner[want] = need

    @precondition(lambda self: self.model.owner)
    @rule(data=st.data())
    def free(self, data):
        addr = data.draw(st.sampled_from(sorted(self.model.owner)))
        self.fl.free(addr)
        del self.model.owner[addr]

    @rule(offset=st.integers(0, 400), size=st.integers(1, 60))
    def allocate_at(self, offset, size):
        addr = self.fl.start + offset
        need = self.need(size)
        free = any(lo <= addr and addr + need <= hi for lo, hi in self.model.free_runs(self.fl.floor))
        if free and addr % self.alignment == 0:
            assert self.fl.allocate_at(addr, size) == addr
            self.model.owner[addr] = need
        else:
            with pytest.raises(AllocatorError):
                self.fl.allocate_at(addr, size)

    @rule(offset=st.integers(0, 200))
    def move_floor(self, offset):
        floor = min(-(-(self.fl.start + offset) // self.alignment) * self.alignment, self.fl.end)
        below = [a for a in self.model.owner if a < floor]
        if below:
            with pytest.raises(AllocatorError):
                self.fl.set_floor(floor)
        else:
            self.fl.set_floor(floor)
            assert self.fl.floor == floor

    @invariant()
    def blocks_match_the_model(self):
        runs = self.model.free_runs(self.fl.floor)  # also asserts no byte is owned twice
        blocks = self.fl.blocks()
        assert [(b.address, b.address + b.size) for b in blocks if not b.allocated] == runs  # coalesced
        assert {b.address: b.size for b in blocks if b.allocated} == self.model.owner
        assert all(a % self.alignment == 0 and a >= self.fl.floor for a in self.model.owner)

    @invariant()
    def statistics_match_the_model(self):
        runs = self.model.free_runs(self.fl.floor)
        stats = self.fl.statistics()
        allocated = sum(self.model.owner.values())
        assert stats.total_allocatable == self.fl.end - self.fl.floor
        assert stats.allocated == allocated and stats.free == sum(hi - lo for lo, hi in runs)
        largest = max((hi - lo for lo, hi in runs), default=0)
        assert stats.largest_free_block == largest
        assert stats.largest_free_block_addrs == tuple(lo for lo, hi in runs if hi - lo == largest)


TestFreeListAgainstModel = FreeListMachine.TestCase
TestFreeListAgainstModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_top_down_and_bottom_up_share_one_region():
    fl = FreeList(1024, alignment=32)
    assert fl.allocate(100) == 0  # padded to 128
    assert fl.allocate(100, top_down=True) == 1024 - 128
    assert fl.allocate(1, top_down=True) == 1024 - 160
    assert fl.statistics().allocated == 288


def test_best_fit_takes_the_smallest_hole_first_fit_the_lowest():
    for policy, expected in (("first_fit", 0), ("best_fit", 300)):
        fl = FreeList(1000, policy=policy)
        a, _, c, _ = fl.allocate(200), fl.allocate(100), fl.allocate(50), fl.allocate(100)
        fl.free(a)  # hole [0, 200)
        fl.free(c)  # hole [300, 350)
        assert fl.allocate(40) == expected


def test_errors_name_the_problem():
    fl = FreeList(256, alignment=64)
    with pytest.raises(AllocatorError, match="no allocated block"):
        fl.free(64)
    with pytest.raises(InputError, match="positive"):
        fl.allocate(0)
    with pytest.raises(InputError, match="policy"):
        FreeList(256, policy="worst_fit")
    fl.allocate(64)
    fl.allocate(64, top_down=True)
    fl.allocate(64, top_down=True)
    with pytest.raises(OutOfMemoryError, match="fragmentation") as err:
        fl.free(fl.allocate(64))  # one block of 64 left: fine
        fl.free(192)
        fl.allocate(128)  # 128 free in two 64-byte holes
    assert err.value.fragmented and err.value.largest_free == 64

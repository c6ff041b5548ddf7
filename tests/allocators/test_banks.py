"""Lockstep banks: per-bank sizes, default directions, reserved and circular-buffer regions, reports."""

import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocators.banks import BankAllocator, interleaved_bytes_per_bank, sharded_bytes_per_bank
from allocators.errors import AllocatorError, InputError, OutOfMemoryError
from allocators.memory_report import block_listing, l1_summary, usage_summary
from tests.allocators.oracles import MemoryModel


@pytest.mark.parametrize("pages,page_size,banks,alignment,expected", [
    (10, 2048, 4, 32, 3 * 2048),     # ceil(10 / 4) = 3 pages per bank
    (8, 2048, 4, 32, 2 * 2048),
    (1, 100, 12, 32, 128),           # one page, padded to the alignment
    (13, 1000, 12, 64, 2 * 1024),    # 1000 -> 1024 per page, two pages in one bank
])
def test_interleaved_bytes_per_bank(pages, page_size, banks, alignment, expected):
    assert interleaved_bytes_per_bank(pages, page_size, banks, alignment) == expected


def test_sharded_bytes_per_bank():
    assert sharded_bytes_per_bank(1000, 8, 8, 32) == 1024
    assert sharded_bytes_per_bank(1000, 9, 8, 32) == 2048  # a second shard in one bank
    with pytest.raises(InputError):
        sharded_bytes_per_bank(0, 1, 8, 32)


def test_dram_grows_up_and_l1_grows_down_by_default():
    dram = BankAllocator("dram", banks=12, bank_size=1 << 20, alignment=32)
    l1 = BankAllocator("l1", banks=64, bank_size=1 << 20, alignment=16, reserved=100 << 10)
    assert dram.allocate_interleaved(24, 2048) == 0
    assert dram.allocate_interleaved(24, 2048) == 2 * 2048
    assert l1.allocate_interleaved(64, 2048) == (1 << 20) - 2048
    assert l1.allocate_sharded(4096, 64, top_down=False) == 100 << 10  # bottom-up stops at the reserved region


def test_lockstep_statistics_multiply_by_the_number_of_banks():
    l1 = BankAllocator("l1", banks=8, bank_size=4096, alignment=64, reserved=1024)
    l1.allocate(1000)
    st_ = l1.statistics()
    assert st_.per_bank.total_allocatable == 3072 and st_.per_bank.allocated == 1024
    assert st_.total_allocated == 8 * 1024 and st_.total_free == 8 * 2048
    assert st_.largest_interleaved_buffer == 8 * 2048


def test_out_of_memory_states_request_need_free_and_largest_block():
    l1 = BankAllocator("l1", banks=4, bank_size=4096, alignment=1024)
    a = l1.allocate(1024)
    l1.allocate(1024)
    l1.allocate(1024)
    l1.free(a)  # free: 1024 at the top and 1024 at the bottom, not contiguous
    with pytest.raises(OutOfMemoryError) as err:
        l1.allocate_interleaved(8, 1024)  # 2 pages per bank
    e = err.value
    assert (e.request, e.per_bank, e.free, e.largest_free, e.banks) == (8192, 2048, 2048, 1024, 4)
    assert e.fragmented
    text = str(e)
    assert "8192 B" in text and "2048 B per bank" in text and "largest free block 1024 B" in text
    assert "fragmentation" in text


def test_circular_buffers_grow_from_the_reserved_region_and_never_reach_a_buffer():
    l1 = BankAllocator("l1", banks=2, bank_size=8192, alignment=32, reserved=1024)
    assert l1.allocate_circular_buffer(1000) == 1024
    assert l1.allocate_circular_buffer(64) == 1024 + 1024
    top = l1.allocate(4096)  # top-down: [4096, 8192)
    assert top == 4096
    with pytest.raises(AllocatorError, match="overlap"):
        l1.allocate_circular_buffer(3000)  # would cover [2112, 5112)
    assert l1.cb_top == 2112  # unchanged after the refusal
    bottom = l1.allocate(100, top_down=True)
    assert bottom >= l1.cb_top
    l1.check_circular_buffers()
    l1.clear_circular_buffers()
    assert l1.allocate(512, top_down=False) == 1024


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "free", "cb", "clear"]), st.integers(1, 2000),
                          st.booleans()), max_size=40))
def test_banks_never_overlap_buffers_circular_buffers_or_the_reserved_region(ops):
    l1 = BankAllocator("l1", banks=4, bank_size=4096, alignment=64, reserved=256)
    live: dict[int, int] = {}
    for op, size, flag in ops:
        model = MemoryModel(0, 4096)
        model.owner = {0: 256, **({256: l1.cb_top - 256} if l1.cb_top > 256 else {}), **live}
        if op == "alloc":
            need = -(-size // 64) * 64
            room = any(hi - lo >= need for lo, hi in model.free_runs(0))
            try:
                live[l1.allocate(size, top_down=flag)] = need
            except OutOfMemoryError:
                assert not room
        elif op == "free" and live:
            addr = sorted(live)[size % len(live)]
            l1.free(addr)
            del live[addr]
        elif op == "cb":
            top = -(-(l1.cb_top + size) // 64) * 64
            clash = any(a < top for a in live) or top > 4096
            try:
                l1.allocate_circular_buffer(size)
                assert not clash
            except AllocatorError:
                assert clash
        elif op == "clear":
            l1.clear_circular_buffers()
        after = MemoryModel(0, 4096)
        after.owner = {0: 256, **({256: l1.cb_top - 256} if l1.cb_top > 256 else {}), **live}
        after.used()  # asserts that no byte has two owners
        assert all(a % 64 == 0 for a in live)


def test_reports_describe_the_banks():
    dram = BankAllocator("dram", banks=2, bank_size=1024, alignment=32)
    l1 = BankAllocator("l1", banks=4, bank_size=1024, alignment=32, reserved=64)
    dram.allocate(100)
    l1.allocate_circular_buffer(64)
    l1.allocate(256)
    memories = {"DRAM": dram, "L1": l1}
    summary = {row["memory"]: row for row in usage_summary(memories)}
    assert summary["DRAM"]["allocated_per_bank"] == 128 and summary["DRAM"]["total_allocated"] == 256
    assert summary["L1"]["allocatable_per_bank"] == 1024 - 128 and summary["L1"]["free_per_bank"] == 1024 - 128 - 256
    (l1_row,) = l1_summary(memories)
    assert l1_row["largest_free_block"] == 1024 - 128 - 256
    assert l1_row["largest_interleaved_buffer"] == 4 * (1024 - 128 - 256) and l1_row["circular_buffer_bytes"] == 64
    listing = [(r["address"], r["size"], r["use"]) for r in block_listing(memories) if r["memory"] == "L1"]
    assert listing == [(0, 64, "reserved"), (64, 64, "circular_buffer"), (128, 640, "free"), (768, 256, "buffer")]


def test_report_tables_and_csv_files(tmp_path):
    from cluster.results.alloc_reports import report_tables, write_reports
    from cluster.results.schemas import RunMeta

    l1 = BankAllocator("l1", banks=4, bank_size=1024, alignment=32)
    l1.allocate(100)
    meta = RunMeta("run-1", "abc", 7)
    tables = report_tables({"L1": l1}, meta)
    assert tables["l1_usage_summary"].column("largest_interleaved_buffer").to_pylist() == [4 * (1024 - 128)]
    assert tables["detailed_memory_usage"].column("use").to_pylist() == ["free", "buffer"]
    paths = write_reports({"L1": l1}, tmp_path, meta)
    assert {p.name for p in paths} >= {"memory_usage_summary.csv", "l1_usage_summary.csv", "detailed_memory_usage.csv"}
    with open(tmp_path / "detailed_memory_usage.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["address"], r["size"], r["allocated"]) for r in rows] == [("0", "896", "false"), ("896", "128", "true")]
    assert rows[0]["run_id"] == "run-1"

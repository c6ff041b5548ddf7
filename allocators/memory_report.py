"""tt-metal-style memory reports as plain rows (column name -> value), one list per report.

1. usage summary: one row per bank type (DRAM, L1, ...): allocatable, allocated, free and
   largest free block, per bank and over all banks;
2. L1 summary: largest contiguous free block per bank and the largest buffer that can
   still be interleaved over every bank (that block times the number of banks);
3. block listing: every block of one bank (all banks are alike), address order.
"""

from __future__ import annotations

from allocators.banks import BankAllocator


def usage_summary(memories: dict[str, BankAllocator]) -> list[dict]:
    rows = []
    for name, mem in memories.items():
        st = mem.statistics()
        rows.append({
            "memory": name, "kind": mem.kind, "banks": mem.banks, "bank_size": mem.bank_size,
            "allocatable_per_bank": st.per_bank.total_allocatable, "allocated_per_bank": st.per_bank.allocated,
            "free_per_bank": st.per_bank.free, "largest_free_block": st.per_bank.largest_free_block,
            "total_allocatable": st.total_allocatable, "total_allocated": st.total_allocated,
            "total_free": st.total_free,
        })
    return rows


def l1_summary(memories: dict[str, BankAllocator]) -> list[dict]:
    """Rows for the SRAM (L1) memories only."""
    rows = []
    for name, mem in memories.items():
        if mem.kind == "dram":
            continue
        st = mem.statistics()
        rows.append({
            "memory": name, "banks": mem.banks, "largest_free_block": st.per_bank.largest_free_block,
            "largest_interleaved_buffer": st.largest_interleaved_buffer,
            "free_per_bank": st.per_bank.free, "total_free": st.total_free,
            "circular_buffer_bytes": mem.cb_top - mem.reserved,
        })
    return rows


def block_listing(memories: dict[str, BankAllocator]) -> list[dict]:
    rows = []
    for name, mem in memories.items():
        for use, block in mem.regions():
            rows.append({"memory": name, "address": block.address, "size": block.size,
                         "allocated": block.allocated, "use": use})
    return rows

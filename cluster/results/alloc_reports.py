"""The allocator memory reports as Arrow tables, Parquet and CSV files (schemas in cluster.results.schemas)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from allocators.banks import BankAllocator
from allocators.memory_report import block_listing, l1_summary, usage_summary
from cluster.results.schemas import ALLOC_BLOCKS, ALLOC_L1_SUMMARY, ALLOC_MEMORY_SUMMARY, RunMeta, TableSchema
from cluster.results.writer import CSV, write_table

REPORTS: dict[str, tuple[TableSchema, Callable[[dict[str, BankAllocator]], list[dict]]]] = {
    "memory_usage_summary": (ALLOC_MEMORY_SUMMARY, usage_summary),
    "l1_usage_summary": (ALLOC_L1_SUMMARY, l1_summary),
    "detailed_memory_usage": (ALLOC_BLOCKS, block_listing),
}


def _columns(schema: TableSchema, rows: list[dict]) -> dict:
    return {c.name: [row[c.name] for row in rows] for c in schema.columns}


def report_tables(memories: dict[str, BankAllocator], meta: RunMeta) -> dict[str, pa.Table]:
    """The three reports, keyed by their tt-metal file name (without .csv)."""
    return {name: schema.build(_columns(schema, rows(memories)), meta)
            for name, (schema, rows) in REPORTS.items()}


def write_reports(memories: dict[str, BankAllocator], out_dir: str | Path, meta: RunMeta,
                  parquet: bool = True) -> list[Path]:
    """Write each report as CSV (and Parquet) into ``out_dir``; returns the paths written."""
    out = Path(out_dir)
    written = []
    for name, table in report_tables(memories, meta).items():
        written.append(write_table(table, out / f"{name}.csv", form=CSV))
        if parquet:
            written.append(write_table(table, out / f"{name}.parquet"))
    return written

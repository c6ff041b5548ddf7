"""A run's tables: those its command always writes and those its workload declares
(``TABLES``), each built from the summarised columns under the table's name without its
command's prefix (run_requests: ``requests``). Which tables a run writes is declared, never
guessed from which columns it happened to give."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from cluster.results import schemas


def columns_key(table: str) -> str:
    """The key a table's columns come under in a run's summarised columns: its name after the
    command's prefix (run_mu_series: mu_series; system_chips: chips)."""
    return table.split("_", 1)[1]


def declared_tables(names: Sequence[str], cols: dict, meta: schemas.RunMeta, who: str) -> dict[str, pa.Table]:
    """The tables ``names`` (cluster/results/schemas.py's) from ``cols``; ``who`` names the run in
    errors. Every declared table must have its columns and every column set must belong to a
    declared table: a table a workload forgot to declare is an error, not a file silently lost."""
    by_name = {t.name: t for t in schemas.ALL_TABLES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"{who} declares tables no schema describes: {', '.join(unknown)}")
    keys = [columns_key(n) for n in names]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{who} declares two tables of the same columns: {', '.join(names)}")
    missing = [n for n, k in zip(names, keys) if k not in cols]
    if missing:
        raise ValueError(f"{who} declares {', '.join(missing)} but gave no columns for it")
    undeclared = sorted(set(cols) - set(keys))
    if undeclared:
        raise ValueError(f"{who} gave columns of tables it does not declare (TABLES): {', '.join(undeclared)}")
    return {n: by_name[n].build(cols[k], meta) for n, k in zip(names, keys)}

"""Reading an rdasim sweep dataset with DuckDB, Polars, pandas and pyarrow.

    python examples/analysis.py results/noc-latency                 # mean latency by the swept axes
    python examples/analysis.py results/noc-latency --metric accepted --json

A sweep writes one Parquet file per point under results/<name>/, hive-partitioned
(sweep_id=<name>/<key>=<value>/<point_id>.parquet). Every file holds every column,
the partition keys included, with their types, so read the files rather than parse
types out of directory names: DuckDB `hive_partitioning = false`, pyarrow and pandas
`partitioning=None`, Polars a `**/*.parquet` glob. Then numbers stay numbers.

Columns: sweep_id, point_id, point_status ('ok' or 'error'), point_error, ... (the
sweep's own), one column per swept config path ('noc.rate' -> noc_rate), then the
command's result columns (rdasim noc: rate, avg_latency, p99_latency, accepted, ...).
The swept columns are listed in results/<name>.manifest.json under "columns".
Each reader below needs its library; missing ones are skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def swept_columns(dataset: Path) -> list[str]:
    manifest = dataset.parent / f"{dataset.name}.manifest.json"
    return list(json.loads(manifest.read_text())["columns"])


def with_duckdb(dataset: Path, axes: list[str], metric: str):
    import duckdb

    keys = ", ".join(axes)
    rel = duckdb.sql(f"""
        SELECT {keys}, avg({metric}) AS {metric}, count(*) AS points
        FROM read_parquet('{dataset}/**/*.parquet', hive_partitioning = false)
        WHERE point_status = 'ok'
        GROUP BY {keys} ORDER BY {keys}
    """)
    types = dict(zip(rel.columns, map(str, rel.types)))
    return [list(r) for r in rel.fetchall()], types


def with_polars(dataset: Path, axes: list[str], metric: str):
    import polars as pl

    df = (pl.scan_parquet(f"{dataset}/**/*.parquet", hive_partitioning=False)
          .filter(pl.col("point_status") == "ok")
          .group_by(axes).agg(pl.col(metric).mean(), pl.len().alias("points"))
          .sort(axes).collect())
    return df.rows(), {k: str(v) for k, v in df.schema.items()}


def with_pandas(dataset: Path, axes: list[str], metric: str):
    import pandas as pd

    df = pd.read_parquet(dataset, partitioning=None)
    df = df[df.point_status == "ok"]
    out = df.groupby(axes).agg(**{metric: (metric, "mean"), "points": (metric, "size")}).reset_index()
    out = out.sort_values(axes)
    return [list(r) for r in out.itertuples(index=False)], {k: str(v) for k, v in out.dtypes.items()}


def with_pyarrow(dataset: Path, axes: list[str], metric: str):
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    table = ds.dataset(dataset, format="parquet", partitioning=None).to_table(
        filter=pc.field("point_status") == "ok")
    out = table.group_by(axes).aggregate([(metric, "mean"), (metric, "count")])
    out = out.rename_columns(axes + [metric, "points"]).sort_by([(a, "ascending") for a in axes])
    return [list(r.values()) for r in out.to_pylist()], {f.name: str(f.type) for f in out.schema}


READERS = {"duckdb": with_duckdb, "polars": with_polars, "pandas": with_pandas, "pyarrow": with_pyarrow}


def main() -> int:
    parser = argparse.ArgumentParser(description="mean of a metric over a sweep's axes, with four readers")
    parser.add_argument("dataset", type=Path, help="the sweep's dataset directory, e.g. results/noc-latency")
    parser.add_argument("--metric", default="avg_latency", help="result column to average (default avg_latency)")
    parser.add_argument("--json", action="store_true", help="one JSON object per reader")
    args = parser.parse_args()
    axes = swept_columns(args.dataset)
    for name, read in READERS.items():
        try:
            rows, types = read(args.dataset, axes, args.metric)
        except ImportError:
            print(f"# {name}: not installed, skipped", file=sys.stderr)
            continue
        if args.json:
            print(json.dumps({"reader": name, "rows": rows, "types": types}, default=str))
            continue
        print(f"== {name}  ({', '.join(f'{k}: {v}' for k, v in types.items())})")
        print("  ".join(f"{c:>14}" for c in axes + [args.metric, "points"]))
        for r in rows:
            print("  ".join(f"{v:>14.6g}" if isinstance(v, float) else f"{v!s:>14}" for v in r))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reading an rdasim sweep dataset with DuckDB, Polars, pandas and pyarrow.

    pip install -e '.[analysis]'                                     # DuckDB, Polars, pandas
    python examples/analysis.py results/noc-latency                 # mean latency over seeds, by the swept axes
    python examples/analysis.py results/noc-latency --metric accepted --json

A sweep writes one Parquet file per point under results/<name>/, hive-partitioned
(sweep_id=<name>/<key>=<value>/<point_id>.parquet). Every file holds every column,
the partition keys included, with their types, so read the files rather than parse
types out of directory names: DuckDB `hive_partitioning = false`, pyarrow and pandas
`partitioning=None`, Polars a `**/*.parquet` glob. Then numbers stay numbers.

Columns: sweep_id, sweep_spec, point_id, point_status ('ok' or 'error'), ... (the
sweep's own), one column per swept config path ('noc.rate' -> noc_rate), then the
command's result columns (rdasim noc: rate, avg_latency, p99_latency, accepted, ...;
rdasim run: status, tokens_per_second, ...). The swept columns are listed in
results/_<name>.manifest.json under "columns".

Seeds (run_seed) are replicates, not conditions: each reader groups by the other swept
columns and reports the mean over seeds, the sample standard deviation and how many
seeds went into it (with them, a 95 % confidence interval is mean +- t(0.975, n-1) sd / sqrt(n)).
Only points stored ok count, and for `rdasim run` only runs that completed (a deadlocked
run has no throughput to average). Each reader needs its library; a missing one is
skipped with a note saying how to install it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def swept_columns(dataset: Path) -> list[str]:
    for name in (f"_{dataset.name}.manifest.json", f"{dataset.name}.manifest.json"):  # the second: older sweeps
        manifest = dataset.parent / name
        if manifest.is_file():
            return list(json.loads(manifest.read_text())["columns"])
    raise SystemExit(f"{dataset}: no manifest beside it (_{dataset.name}.manifest.json); is this a sweep's dataset?")


def conditions(columns: list[str]) -> list[str]:
    """The swept columns that are conditions: seeds are replicates."""
    return [c for c in columns if not c.endswith("seed")]


def _where(has_status: bool) -> str:
    return "point_status = 'ok'" + (" AND status = 'completed'" if has_status else "")


def with_duckdb(dataset: Path, axes: list[str], metric: str, has_status: bool):
    import duckdb

    keys = ", ".join(axes)
    rel = duckdb.sql(f"""
        SELECT {keys}, avg({metric}) AS {metric}, stddev_samp({metric}) AS sd, count({metric}) AS seeds
        FROM read_parquet('{dataset}/**/*.parquet', hive_partitioning = false, union_by_name = true)
        WHERE {_where(has_status)}
        GROUP BY {keys} ORDER BY {keys}
    """)
    types = dict(zip(rel.columns, map(str, rel.types)))
    return [list(r) for r in rel.fetchall()], types


def with_polars(dataset: Path, axes: list[str], metric: str, has_status: bool):
    import polars as pl

    lf = pl.scan_parquet(f"{dataset}/**/*.parquet", hive_partitioning=False, missing_columns="insert")
    keep = pl.col("point_status") == "ok"
    if has_status:
        keep = keep & (pl.col("status") == "completed")
    df = (lf.filter(keep).group_by(axes)
          .agg(pl.col(metric).mean(), pl.col(metric).std().alias("sd"), pl.col(metric).count().alias("seeds"))
          .sort(axes).collect())
    return df.rows(), {k: str(v) for k, v in df.schema.items()}


def with_pandas(dataset: Path, axes: list[str], metric: str, has_status: bool):
    import pandas as pd

    df = pd.read_parquet(dataset, partitioning=None)
    df = df[df.point_status == "ok"]
    if has_status:
        df = df[df.status == "completed"]
    out = df.groupby(axes).agg(**{metric: (metric, "mean"), "sd": (metric, "std"), "seeds": (metric, "count")})
    out = out.reset_index().sort_values(axes)
    rows = [[None if isinstance(v, float) and v != v else v for v in r] for r in out.itertuples(index=False)]
    return [[v.item() if hasattr(v, "item") else v for v in r] for r in rows], {k: str(v) for k, v in out.dtypes.items()}


def with_pyarrow(dataset: Path, axes: list[str], metric: str, has_status: bool):
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    keep = pc.field("point_status") == "ok"
    if has_status:
        keep = keep & (pc.field("status") == "completed")
    table = ds.dataset(dataset, format="parquet", partitioning=None).to_table(filter=keep)
    out = table.group_by(axes).aggregate([(metric, "mean"), (metric, "stddev", pc.VarianceOptions(ddof=1)),
                                          (metric, "count")])
    out = out.rename_columns(axes + [metric, "sd", "seeds"]).sort_by([(a, "ascending") for a in axes])
    return [list(r.values()) for r in out.to_pylist()], {f.name: str(f.type) for f in out.schema}


READERS = {"duckdb": with_duckdb, "polars": with_polars, "pandas": with_pandas, "pyarrow": with_pyarrow}


def main() -> int:
    parser = argparse.ArgumentParser(description="mean of a metric over seeds, by the swept axes, with four readers")
    parser.add_argument("dataset", type=Path, help="the sweep's dataset directory, e.g. results/noc-latency")
    parser.add_argument("--metric", default="avg_latency", help="result column to average (default avg_latency)")
    parser.add_argument("--json", action="store_true", help="one JSON object per reader")
    args = parser.parse_args()
    axes = conditions(swept_columns(args.dataset))
    import pyarrow.dataset as ds

    names = set(ds.dataset(args.dataset, format="parquet", partitioning=None).schema.names)
    if args.metric not in names:
        raise SystemExit(f"{args.dataset}: no column {args.metric!r}; columns: {', '.join(sorted(names))}")
    has_status = "status" in names and "workload" in names  # rdasim run: completed, deadlocked, ...
    for name, read in READERS.items():
        try:
            rows, types = read(args.dataset, axes, args.metric, has_status)
        except ImportError:
            print(f"# {name}: not installed, skipped (pip install -e '.[analysis]')", file=sys.stderr)
            continue
        if args.json:
            print(json.dumps({"reader": name, "rows": rows, "types": types}, default=str))
            continue
        print(f"== {name}  ({', '.join(f'{k}: {v}' for k, v in types.items())})")
        print("  ".join(f"{c:>14}" for c in axes + [args.metric, "sd", "seeds"]))
        for r in rows:
            print("  ".join(f"{v:>14.6g}" if isinstance(v, float) else f"{v!s:>14}" for v in r))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reading an rdasim sweep's results with DuckDB, Polars, pandas and pyarrow.

    pip install -e '.[analysis]'                                     # DuckDB, Polars, pandas
    python examples/analysis.py results/noc-latency                 # mean latency over seeds, by the swept axes
    python examples/analysis.py results/noc-latency --metric accepted --json
    python examples/analysis.py results/moe-reclaim                 # a run sweep: throughput by default

A sweep writes one Parquet dataset per table under results/<name>/ (docs/results.md):
results/<name>/<table>/sweep_id=<name>/<key>=<value>/<point_id>.<table>.parquet, the
points' result rows in the command's summary table (noc_summary, run_summary,
system_summary). One glob, **/*.<table>.parquet, finds one table's files at any depth,
in one sweep or a whole results tree. Every file holds every column, the partition keys
included, with their types, so read the files rather than parse types out of directory
names (DuckDB `hive_partitioning = false`), and unify the schemas by column name
(DuckDB `union_by_name`, Polars `how="diagonal_relaxed"`, pandas `concat`, pyarrow
`unify_schemas`): error rows, and sweeps that swept other axes, carry other columns.

Columns: sweep_id, sweep_spec, point_id, point_status ('ok' or 'error'), ... (the
sweep's own), one column per swept config path ('noc.rate' -> noc_rate), then the
command's result columns (rdasim noc: rate, avg_latency, p99_latency, accepted, ...;
rdasim run: status, tokens_per_second, ...). The swept columns and the result table are
listed in results/_<name>.manifest.json under "columns" and "result_table".

Seeds (run_seed) are replicates, not conditions: each reader groups by the other swept
columns and reports the mean over seeds, the sample standard deviation and how many
seeds went into it (with them, a 95 % confidence interval is mean +- t(0.975, n-1) sd / sqrt(n)).
Only points stored ok count, and for `rdasim run` only runs that completed (a deadlocked
run has no throughput to average). Each reader needs its library; a missing one is
skipped with a note saying how to install it.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from pathlib import Path
from typing import NoReturn


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit 2 (as rdasim does)."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def manifest_of(sweep: Path) -> tuple[Path, dict]:
    """The sweep's directory and its manifest: ``sweep`` is the sweep's directory, or an --out directory
    holding one sweep (its _<name>.manifest.json inside)."""
    for name in (f"_{sweep.name}.manifest.json", f"{sweep.name}.manifest.json"):  # the second: older sweeps
        manifest = sweep.parent / name
        if manifest.is_file():
            return sweep, json.loads(manifest.read_text())
    inside = sorted(sweep.glob("_*.manifest.json"))
    if len(inside) == 1:
        return sweep / inside[0].name[1:-len(".manifest.json")], json.loads(inside[0].read_text())
    if inside:
        fail(f"{sweep} holds {len(inside)} sweeps: name one of "
             + ", ".join(str(sweep / m.name[1:-len(".manifest.json")]) for m in inside))
    fail(f"{sweep}: no sweep here (no _<name>.manifest.json beside it or in it)")


def result_glob(sweep: Path, manifest: dict) -> str:
    """The glob of the sweep's result rows: one table's files, wherever they lie under the sweep."""
    if not manifest.get("result_table"):
        fail(f"{sweep}: written by an older rdasim, before one dataset per table (docs/results.md)")
    return f"{sweep}/**/*.{manifest['result_table']}.parquet"


def files_of(pattern: str) -> list[str]:
    return sorted(glob.glob(pattern, recursive=True))


# the metric averaged when none is named: the first of these the table has (noc, run, system, noop sweeps)
HEADLINE = ("avg_latency", "tokens_per_second", "step_seconds_mean", "seconds_per_batch_simulated", "sim_seconds",
            "value")


def numeric_columns(files: list[str]) -> list[str]:
    """The table's numeric columns, in file order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out: list[str] = []
    for f in files:
        for field in pq.read_schema(f):
            if (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)) and field.name not in out:
                out.append(field.name)
    return out


def pick_metric(asked: str | None, numeric: list[str], where: Path) -> str:
    """``asked`` if the table has it as a number, else (none asked) the first headline metric it has."""
    if asked is None:
        found = next((m for m in HEADLINE if m in numeric), None)
        if found is None:
            fail(f"{where}: none of {', '.join(HEADLINE)}; name one with --metric")
        return found
    if asked not in numeric:
        shown = [c for c in HEADLINE if c in numeric] or numeric[:8]
        fail(f"{where}: no numeric column {asked!r}; try {', '.join(shown)} "
             f"({len(numeric)} numeric columns in all: the manifest's result_table)")
    return asked


def conditions(columns: list[str]) -> list[str]:
    """The swept columns that are conditions: seeds are replicates."""
    return [c for c in columns if not c.endswith("seed")]


def _where(has_status: bool) -> str:
    return "point_status = 'ok'" + (" AND status = 'completed'" if has_status else "")


def with_duckdb(pattern: str, axes: list[str], metric: str, has_status: bool):
    import duckdb

    keys = ", ".join(axes)
    rel = duckdb.sql(f"""
        SELECT {keys}, avg({metric}) AS {metric}, stddev_samp({metric}) AS sd, count({metric}) AS seeds
        FROM read_parquet('{pattern}', hive_partitioning = false, union_by_name = true)
        WHERE {_where(has_status)}
        GROUP BY {keys} ORDER BY {keys}
    """)
    types = dict(zip(rel.columns, map(str, rel.types)))
    return [list(r) for r in rel.fetchall()], types


def with_polars(pattern: str, axes: list[str], metric: str, has_status: bool):
    import polars as pl

    lf = pl.concat([pl.scan_parquet(f) for f in files_of(pattern)], how="diagonal_relaxed")  # columns by name
    keep = pl.col("point_status") == "ok"
    if has_status:
        keep = keep & (pl.col("status") == "completed")
    df = (lf.filter(keep).group_by(axes)
          .agg(pl.col(metric).mean(), pl.col(metric).std().alias("sd"), pl.col(metric).count().alias("seeds"))
          .sort(axes).collect())
    return df.rows(), {k: str(v) for k, v in df.schema.items()}


def with_pandas(pattern: str, axes: list[str], metric: str, has_status: bool):
    import pandas as pd

    df = pd.concat([pd.read_parquet(f) for f in files_of(pattern)], ignore_index=True)  # columns by name
    df = df[df.point_status == "ok"]
    if has_status:
        df = df[df.status == "completed"]
    out = df.groupby(axes).agg(**{metric: (metric, "mean"), "sd": (metric, "std"), "seeds": (metric, "count")})
    out = out.reset_index().sort_values(axes)
    rows = [[None if isinstance(v, float) and v != v else v for v in r] for r in out.itertuples(index=False)]
    values = [[v.item() if hasattr(v, "item") else v for v in r] for r in rows]
    return values, {k: str(v) for k, v in out.dtypes.items()}


def with_pyarrow(pattern: str, axes: list[str], metric: str, has_status: bool):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    keep = pc.field("point_status") == "ok"
    if has_status:
        keep = keep & (pc.field("status") == "completed")
    files = files_of(pattern)
    schema = pa.unify_schemas([pq.read_schema(f) for f in files])  # columns by name
    table = ds.dataset(files, format="parquet", schema=schema).to_table(filter=keep)
    out = table.group_by(axes).aggregate([(metric, "mean"), (metric, "stddev", pc.VarianceOptions(ddof=1)),
                                          (metric, "count")])
    out = out.rename_columns(axes + [metric, "sd", "seeds"]).sort_by([(a, "ascending") for a in axes])
    return [list(r.values()) for r in out.to_pylist()], {f.name: str(f.type) for f in out.schema}


READERS = {"duckdb": with_duckdb, "polars": with_polars, "pandas": with_pandas, "pyarrow": with_pyarrow}


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False,
                                     description="mean of a metric over seeds, by the swept axes, with four readers")
    parser.add_argument("sweep", type=Path, help="the sweep's directory, e.g. results/noc-latency (or an --out "
                                                 "directory holding one sweep)")
    parser.add_argument("--metric", help="result column to average (default: the first of avg_latency, "
                                         "tokens_per_second, step_seconds_mean, ... the table has)")
    parser.add_argument("--json", action="store_true", help="one JSON object per reader")
    args = parser.parse_args()
    args.sweep, manifest = manifest_of(args.sweep)
    axes = conditions(list(manifest["columns"]))
    pattern = result_glob(args.sweep, manifest)
    import pyarrow.parquet as pq

    files = files_of(pattern)
    names = {n for f in files for n in pq.read_schema(f).names}
    args.metric = pick_metric(args.metric, numeric_columns(files), args.sweep)
    has_status = "status" in names and "workload" in names  # rdasim run: completed, deadlocked, ...
    for name, read in READERS.items():
        try:
            rows, types = read(pattern, axes, args.metric, has_status)
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

"""Optional: the dataset read by DuckDB, Polars and pandas as examples/analysis.py shows (skipped
when a library is not installed). Partition keys of every kind come back as their own types. And one
table read across a whole results tree (runs and sweeps) by the four snippets docs/results.md shows,
with the schemas unified: every column of every file, every row once."""

import json
import math
import re
import subprocess
import sys
import textwrap

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from cluster.results.layout import table_files, table_names
from cluster.results.reading import read_table
from cluster.sweep.compact import compact
from cluster.sweep.dataset import read_dataset
from cluster.sweep.plan import plan_sweep
from cluster.sweep.runner import run_sweep
from tests.cluster.commands.test_run import KV, SMALL
from tests.paths import EXAMPLES, ROOT

EXAMPLE = EXAMPLES / "analysis.py"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readers")
    spec = tmp / "r.toml"
    spec.write_text(textwrap.dedent("""
        [sweep]
        name = "r"
        command = "noc"
        partition_by = ["noc.k", "noc.rate", "noc.traffic"]
        [base]
        noc.warmup_cycles = 100
        noc.measure_cycles = 200
        [axes]
        noc.k = [4]
        noc.rate = [0.1, 0.3]
        noc.traffic = ["uniform", "neighbor"]
        run.seed = [1, 2]
    """))
    run_sweep(plan_sweep(spec), tmp / "out", quiet=True, in_process=True)
    return tmp / "out" / "r"


def _files(sweep):
    return f"{sweep}/**/*.noc_summary.parquet"


def test_duckdb_reads_numbers_as_numbers(dataset):
    duckdb = pytest.importorskip("duckdb")
    rel = duckdb.sql(f"SELECT * FROM read_parquet('{_files(dataset)}', hive_partitioning = false)")
    types = dict(zip(rel.columns, map(str, rel.types)))
    assert (types["noc_k"], types["noc_rate"], types["noc_traffic"]) == ("BIGINT", "DOUBLE", "VARCHAR")
    assert types["avg_latency"] == "DOUBLE" and types["saturated"] == "BOOLEAN"
    assert len(rel.fetchall()) == 8


def test_polars_reads_numbers_as_numbers(dataset):
    pl = pytest.importorskip("polars")
    df = pl.read_parquet(_files(dataset))
    assert (df.schema["noc_k"], df.schema["noc_rate"], df.schema["noc_traffic"]) == (pl.Int64, pl.Float64, pl.String)
    assert df.height == 8


def test_pandas_reads_numbers_as_numbers(dataset):
    pd = pytest.importorskip("pandas")
    df = pd.read_parquet(dataset / "noc_summary", partitioning=None)
    assert str(df.noc_k.dtype) == "int64" and str(df.noc_rate.dtype) == "float64" and len(df) == 8


def test_analysis_example_averages_over_seeds_with_every_reader(dataset):
    for lib in ("duckdb", "polars", "pandas"):
        pytest.importorskip(lib)
    out = subprocess.run([sys.executable, str(EXAMPLE), str(dataset), "--json"], capture_output=True, text=True,
                         check=True).stdout
    results = {r["reader"]: r for r in map(json.loads, out.splitlines())}
    assert set(results) == {"duckdb", "polars", "pandas", "pyarrow"}
    # grouped by the conditions (k, rate, traffic), each the mean over its two seeds
    table = read_dataset(dataset).filter(pc.equal(read_dataset(dataset)["point_status"], "ok"))
    by = {}
    for r in table.to_pylist():
        by.setdefault((r["noc_k"], r["noc_rate"], r["noc_traffic"]), []).append(r["avg_latency"])
    expected = sorted([*k, sum(v) / 2, abs(v[0] - v[1]) / 2 ** 0.5, 2] for k, v in by.items())
    assert len(expected) == 4
    for name, result in results.items():
        got = sorted(result["rows"])
        assert [g[:3] + g[5:] for g in got] == [e[:3] + e[5:] for e in expected], name
        assert [g[3] for g in got] == pytest.approx([e[3] for e in expected]), name  # the mean over seeds
        assert [g[4] for g in got] == pytest.approx([e[4] for e in expected]), name  # their sample sd
        assert all(isinstance(g[0], int) and isinstance(g[1], float) for g in got), name


def test_analysis_example_names_the_extra_when_a_reader_is_missing(dataset, tmp_path):
    blocker = tmp_path / "duckdb.py"  # shadows the real module: importing it fails as if it were not installed
    blocker.write_text("raise ImportError('not installed')\n")
    env = {"PYTHONPATH": str(tmp_path)}
    import os

    got = subprocess.run([sys.executable, str(EXAMPLE), str(dataset), "--json"], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True)
    assert "# duckdb: not installed, skipped (pip install -e '.[analysis]')" in got.stderr


# ----------------------------------------------------------------------------- a whole results tree
DOCS = ROOT / "docs" / "results.md"
READERS = {"pyarrow": "table", "pandas": "df", "polars": "df", "duckdb": "rel"}  # the variable each snippet sets


def _snippets() -> dict[str, str]:
    """docs/results.md's Python snippets, by the library each imports."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    found = {}
    for code in blocks:
        for lib in READERS:
            if re.search(rf"^import {lib}\b", code, re.M) and lib not in found and (lib != "pyarrow" or
                                                                                 "import pandas" not in code):
                found[lib] = code
    return found


def _sweep_into(tmp, out, name, axes):
    spec = tmp / f"{name}.toml"
    spec.write_text(f'[sweep]\nname = "{name}"\ncommand = "noc"\npartition_by = ["noc.traffic"]\n[base]\n'
                    'noc.rows = 4\nnoc.cols = 8\nnoc.warmup_cycles = 100\nnoc.measure_cycles = 200\nnoc.rate = 0.2\n'
                    f'[axes]\n{axes}')
    run_sweep(plan_sweep(spec), out, quiet=True, in_process=True)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """What the README's commands leave: two runs in results/noc and results/kv, and two sweeps with
    different axes (one with error rows: a transpose on a 4 x 8 grid) in results/."""
    tmp = tmp_path_factory.mktemp("tree")
    results = tmp / "results"
    assert main(["noc", "--k", "4", "--rates", "0.1,0.3", "--set", "noc.warmup_cycles=100",
                 "--set", "noc.measure_cycles=200", "--out", str(results / "noc"), "--quiet"]) == 0
    assert main(["run", str(EXAMPLES / "kv_decode.toml"), *SMALL, *KV, "--out", str(results / "kv")]) == 0
    _sweep_into(tmp, results, "a", 'noc.rate = [0.1, 0.3]\nnoc.traffic = ["uniform", "transpose"]\n')
    _sweep_into(tmp, results, "b", "noc.vcs = [2, 4]\n")
    compact(results / "a")  # one sweep compacted, one in point files: the readers take both
    return results


def _truth(results, table):
    """Every row of every file of ``table``, read one file at a time, and the union of their columns."""
    rows, columns = [], set()
    for f in sorted(results.rglob(f"*.{table}.parquet")):
        t = pq.read_table(f)
        columns |= set(t.column_names)
        rows += t.to_pylist()
    return rows, columns


def _key(row):
    def clean(v):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else v

    return (clean(row.get("run_id")), clean(row.get("sweep_id")), clean(row.get("point_id")), clean(row["rate"]),
            clean(row.get("avg_latency")), clean(row.get("noc_vcs")), clean(row.get("noc_traffic")))


def _rows(lib, value):
    if lib == "pyarrow":
        return value.to_pylist(), value.column_names
    if lib == "pandas":
        return value.to_dict("records"), list(value.columns)
    if lib == "polars":
        return value.to_dicts(), value.columns
    return [dict(zip(value.columns, r)) for r in value.fetchall()], value.columns


def test_the_tree_holds_one_dataset_per_table_and_side_files_outside_them(tree):
    assert [f.name.split("-")[0] for f in (tree / "a" / "noc_summary").rglob("*.parquet")] == ["compact"] * 2
    for table_dir in [d for d in tree.rglob("*") if d.is_dir() and d.name in table_names()]:
        assert all(f.name.endswith(f".{table_dir.name}.parquet") for f in table_dir.rglob("*") if f.is_file())
    assert (tree / "kv" / "action_counts.yaml").is_file() and (tree / "kv" / "run.json").is_file()
    assert ds.dataset(tree / "kv" / "run_summary", format="parquet").to_table().num_rows == 1
    assert pq.read_table(tree / "kv" / "run_summary").num_rows == 1  # its run= directory clashes with no column
    assert read_table(tree, "run_summary").num_rows == 1  # the kv run's, not another table's
    every = {f for f in tree.rglob("*.parquet")}
    assert every == {f for t in table_names() for f in table_files(tree, t)}  # every file belongs to one table


@pytest.mark.parametrize("lib", list(READERS))
def test_one_table_across_the_whole_tree_with_each_reader(tree, lib, monkeypatch):
    if lib != "pyarrow":
        pytest.importorskip(lib)
    rows, columns = _truth(tree, "noc_summary")
    assert len(rows) == 2 + 4 + 2 and {"avg_latency", "noc_vcs", "noc_traffic", "sweep_id", "run_id"} <= columns
    monkeypatch.chdir(tree.parent)  # the snippets read "results"
    snippets = _snippets()
    assert set(snippets) == set(READERS)
    scope: dict = {}
    exec(snippets[lib], scope)  # noqa: S102 - the documentation's own code
    got, names = _rows(lib, scope[READERS[lib]])
    assert set(names) == columns, lib  # nothing dropped, nothing from another table
    assert sorted(map(_key, got), key=repr) == sorted(map(_key, rows), key=repr), lib
    ok = [r for r in got if r.get("point_status") in (None, "ok") or r.get("point_status") != r.get("point_status")]
    assert ok and all(isinstance(r["avg_latency"], float) and r["avg_latency"] > 0 for r in ok), lib


def test_the_sql_in_the_docs_groups_runs_and_sweep_points(tree, monkeypatch):
    duckdb = pytest.importorskip("duckdb")
    (sql,) = re.findall(r"```sql\n(.*?)```", DOCS.read_text(), re.S)
    monkeypatch.chdir(tree.parent)
    got = duckdb.sql(sql).fetchall()
    sources = {r[0] for r in got}
    assert {"a", "b"} <= sources and any(s.startswith(read_table(tree / "noc", "noc_summary")["run_id"][0].as_py())
                                          for s in sources)
    assert sum(r[3] for r in got) == 2 + 2 + 2  # runs' rows and the sweeps' ok points (2 transposes failed)


# ----------------------------------------------------------------------------- a compaction killed half-way
READ_ONE_SWEEP = {  # every row of sweep k's result table, as each reader is told to read a sweep (docs/sweeps.md)
    "pyarrow": lambda d: ds.dataset(d / "sweep_noop", format="parquet").to_table().column("point_id").to_pylist(),
    "pandas": lambda d: list(__import__("pandas").read_parquet(d / "sweep_noop", partitioning=None)["point_id"]),
    "polars": lambda d: __import__("polars").read_parquet(f"{d}/**/*.sweep_noop.parquet")["point_id"].to_list(),
    "duckdb": lambda d: [r[0] for r in __import__("duckdb").sql(
        f"SELECT point_id FROM read_parquet('{d}/**/*.sweep_noop.parquet', hive_partitioning = false)").fetchall()],
}


@pytest.mark.parametrize("lib", list(READ_ONE_SWEEP))
def test_a_killed_compaction_shows_each_reader_no_row_twice_and_the_next_one_every_row_once(tmp_path, lib):
    from tests.cluster.sweep.test_compact import _noop_sweep, compact_killed_midway

    if lib != "pyarrow":
        pytest.importorskip(lib)
    spec, out = _noop_sweep(tmp_path, 300)
    every = sorted(read_dataset(out / "k").column("point_id").to_pylist())
    compact_killed_midway(out, rows=3)
    seen = READ_ONE_SWEEP[lib](out / "k")
    assert len(seen) == len(set(seen)) and set(seen) <= set(every)
    assert main(["sweep", "compact", str(out), "--quiet"]) == 0  # finishes the killed one, compacts the rest
    assert sorted(READ_ONE_SWEEP[lib](out / "k")) == every

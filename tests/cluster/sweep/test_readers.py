"""Optional: the dataset read by DuckDB, Polars and pandas as examples/analysis.py shows (skipped
when a library is not installed). Partition keys of every kind come back as their own types."""

import json
import subprocess
import sys
import textwrap

import pyarrow.compute as pc
import pytest

from cluster.sweep.dataset import read_dataset
from cluster.sweep.plan import plan_sweep
from cluster.sweep.runner import run_sweep
from tests.paths import EXAMPLES

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


def test_duckdb_reads_numbers_as_numbers(dataset):
    duckdb = pytest.importorskip("duckdb")
    rel = duckdb.sql(f"SELECT * FROM read_parquet('{dataset}/**/*.parquet', hive_partitioning = false)")
    types = dict(zip(rel.columns, map(str, rel.types)))
    assert (types["noc_k"], types["noc_rate"], types["noc_traffic"]) == ("BIGINT", "DOUBLE", "VARCHAR")
    assert types["avg_latency"] == "DOUBLE" and types["saturated"] == "BOOLEAN"
    assert len(rel.fetchall()) == 8


def test_polars_reads_numbers_as_numbers(dataset):
    pl = pytest.importorskip("polars")
    df = pl.read_parquet(f"{dataset}/**/*.parquet")
    assert (df.schema["noc_k"], df.schema["noc_rate"], df.schema["noc_traffic"]) == (pl.Int64, pl.Float64, pl.String)
    assert df.height == 8


def test_pandas_reads_numbers_as_numbers(dataset):
    pd = pytest.importorskip("pandas")
    df = pd.read_parquet(dataset, partitioning=None)
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

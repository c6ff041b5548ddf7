"""Sweeping `rdasim run`: points go through the same job (ChipJob, cluster/jobs/chip.py) as the command."""

import textwrap

import pyarrow as pa
import pytest

from cluster.config import config_hash, load
from cluster.config.run import RUN_SCHEMA
from cluster.sweep.dataset import read_dataset
from cluster.sweep.plan import plan_sweep
from cluster.sweep.runner import run_sweep
from tests.paths import EXAMPLES


def test_a_run_sweep_stores_every_table_and_reproduces_the_race(tmp_path):
    spec = tmp_path / "race.toml"
    spec.write_text(f'base = "{EXAMPLES / "race.toml"}"\n' + textwrap.dedent("""
        [sweep]
        name = "race"
        command = "run"
        partition_by = ["memory.reclaim"]
        [axes]
        memory.reclaim = ["refcount", "refcount-gated", "partial-free"]
    """))
    summary = run_sweep(plan_sweep(spec), tmp_path / "out", quiet=True, in_process=True)
    assert (summary.computed, summary.failed) == (3, 0)
    rows = {r["memory_reclaim"]: r for r in read_dataset(tmp_path / "out" / "race").to_pylist()}
    assert rows["refcount"]["use_after_free"] > 0  # a -1 overtook a +1
    assert rows["refcount-gated"]["use_after_free"] == 0 and rows["partial-free"]["use_after_free"] == 0
    for reclaim, r in rows.items():  # each point ran the config `rdasim run race.toml --set` resolves
        assert r["config_hash"] == config_hash(load(RUN_SCHEMA, EXAMPLES / "race.toml", [f"memory.reclaim={reclaim}"]))
    for table in ("run_mu_series", "run_buffers", "run_links"):
        t = read_dataset(tmp_path / "out" / "race", table=table)
        assert set(t["point_id"].to_pylist()) == {r["point_id"] for r in rows.values()}
        assert t.schema.field("memory_reclaim").type == pa.string()


def test_report_of_a_run_sweep_compares_messages_across_protocols(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from cluster.cli import main

    spec = tmp_path / "race.toml"
    spec.write_text(f'base = "{EXAMPLES / "race.toml"}"\n[sweep]\nname = "race"\ncommand = "run"\n'
                    '[axes]\nmemory.reclaim = ["refcount", "partial-free"]\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--in-process", "--quiet"]) == 0
    assert main(["report", str(tmp_path / "out"), "--quiet"]) == 0
    written = {p.split("/")[-1] for p in capsys.readouterr().out.split()}
    assert "race-messages-vs-memory_reclaim.png" in written
    assert any(w.endswith("memory_over_time.png") for w in written)
    assert any(w.endswith("mu_utilization.png") for w in written)

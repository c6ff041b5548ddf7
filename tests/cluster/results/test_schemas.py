"""The one registry of result tables: every declared table is in it, and the printed reference lists them all."""

import subprocess
import sys

from cluster.results import schemas
from tests.paths import ROOT


def test_every_declared_table_is_registered_once():
    declared = {id(v) for v in vars(schemas).values() if isinstance(v, schemas.TableSchema)}
    registered = [id(t) for t in schemas.ALL_TABLES]
    assert len(registered) == len(set(registered))
    assert set(registered) == declared
    names = [t.name for t in schemas.ALL_TABLES]
    assert len(names) == len(set(names))


def test_the_printed_reference_lists_every_table():
    out = subprocess.run([sys.executable, "-m", "cluster.results.schemas"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    headings = [line.split("`")[1] for line in out.splitlines() if line.startswith("### `")]
    assert headings == [t.name for t in schemas.ALL_TABLES]
    assert {"system_summary", "system_steps", "system_links", "system_chips"} <= set(headings)


def test_a_built_table_carries_its_name_and_the_run_identity():
    meta = schemas.RunMeta("r1", "abc", 7)
    table = schemas.SWEEP_NOOP.build({"value": 1.5, "slept": 0.0}, meta)
    assert table.num_rows == 1 and table.schema.metadata[b"table"] == b"sweep_noop"
    assert table.column("seed").to_pylist() == [7] and table.column("config_hash").to_pylist() == ["abc"]
    assert table.column_names[-len(schemas.META_COLUMNS):] == [c.name for c in schemas.META_COLUMNS]

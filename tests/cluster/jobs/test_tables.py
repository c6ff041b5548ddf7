"""A run writes the tables its command always writes and those its workload declares, each from
the columns under its name without the prefix; a declaration that does not match the columns
given is an error naming the table."""

import pytest

from cluster.jobs.chip import CHIP_TABLES
from cluster.jobs.tables import columns_key, declared_tables
from cluster.results import schemas
from sim.workloads import WORKLOADS

META = schemas.RunMeta("run", "hash", 1)
LINKS = {"src": [0, 1], "dst": [1, 0], "dim": [0, 0], "bytes": [5, 7], "utilization": [0.5, 0.7]}


def test_every_declared_table_is_a_schema_whose_columns_no_other_table_of_the_run_takes():
    names = {t.name for t in schemas.ALL_TABLES}
    for kind in WORKLOADS.names():
        cls = WORKLOADS.get(kind)
        base = ("system_steps", "system_links") if cls.CAPABILITIES.system else CHIP_TABLES
        assert set(cls.TABLES) <= names, kind
        keys = [columns_key(n) for n in base + cls.TABLES]
        assert len(keys) == len(set(keys)), kind


def test_a_declared_table_is_built_from_its_columns():
    got = declared_tables(("system_links",), {"links": LINKS}, META, "test")
    assert list(got) == ["system_links"]
    assert got["system_links"]["bytes"].to_pylist() == [5, 7]
    assert set(got["system_links"]["run_id"].to_pylist()) == {"run"}


@pytest.mark.parametrize("names, cols, error", [
    (("system_links",), {"links": LINKS, "chips": {}}, "does not declare \\(TABLES\\): chips"),
    (("system_links", "system_chips"), {"links": LINKS}, "declares system_chips but gave no columns"),
    (("system_links", "run_links"), {"links": LINKS}, "two tables of the same columns"),
    (("run_linkz",), {"linkz": LINKS}, "no schema describes: run_linkz"),
])
def test_a_declaration_that_does_not_match_the_columns_is_refused(names, cols, error):
    with pytest.raises(ValueError, match="workload w .*" + error):
        declared_tables(names, cols, META, "workload w")

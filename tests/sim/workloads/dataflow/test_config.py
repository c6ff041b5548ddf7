"""Bad dataflow configs are refused in one message naming the key."""

import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, chip_config


def _errors(raw: dict) -> str:
    with pytest.raises(ConfigError) as e:
        chip_config(load(RUN_SCHEMA, raw=raw))
    return str(e.value)


BASE = {"chip": {"preset": "plasticine"}, "workload": {"kind": "dataflow"}}


def test_neither_plan_nor_graph():
    assert "give workload.dataflow.plan" in _errors(BASE)


def test_missing_plan_file(tmp_path):
    raw = {**BASE, "workload": {"kind": "dataflow", "dataflow": {"plan": str(tmp_path / "none.json")}}}
    assert "does not exist" in _errors(raw)


def test_required_graph_keys_are_named():
    raw = {**BASE, "workload": {"kind": "dataflow", "dataflow": {"graph": {"kind": "llm", "llm": {"heads": 12}}}}}
    text = _errors(raw)
    assert "workload.dataflow.graph.llm.hidden: is required" in text
    assert "workload.dataflow.graph.llm.seq: is required" in text


def test_jitter_is_refused():
    raw = {**BASE, "noc": {"jitter": 2},
           "workload": {"kind": "dataflow", "dataflow": {"graph": {"kind": "llm", "llm": {
               "hidden": 256, "heads": 4, "seq": 64, "layers": 1, "global_batch": 1, "tile_size": 16}}}}}
    assert "noc.jitter: must be 0" in _errors(raw)


def test_a_plan_for_another_chip(tmp_path):
    import json

    from tests.sim.workloads.dataflow.harness import EW, Kernel, chain, plan_of

    plan = plan_of(chain([Kernel("a", EW, 64, 1, 64)]), 64, 16)
    (tmp_path / "plan.json").write_text(json.dumps({"plan": plan.to_dict()}))
    raw = {"chip": {"preset": "sn40l-like"},
           "workload": {"kind": "dataflow", "dataflow": {"plan": str(tmp_path / "plan.json")}}}
    assert "the plan maps onto 'plasticine'; this run's chip is 'sn40l-like'" in _errors(raw)

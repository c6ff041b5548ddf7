"""A run config names a node by its preset (mapping/systems.py); any of its keys still overridable."""

import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, system_config
from mapping.systems import SYSTEMS


def test_the_preset_gives_sockets_chip_and_network():
    cfg = load(RUN_SCHEMA, raw={"system": {"preset": "sn40l-16"}})
    node = SYSTEMS["sn40l-16"]
    assert cfg["system"]["chips"] == 16 and cfg["system"]["chip"] == "sn40l"
    (dim,) = cfg["system"]["network"]
    assert (dim["kind"], dim["size"], dim["parallelism"]) == ("fc", 16, "TP")
    assert dim["link_bandwidth"] == node.network[0].link_bandwidth == 100e9
    assert dim["link_latency"] == pytest.approx(500e-9)


def test_any_key_is_still_overridable_in_the_file_or_by_set():
    cfg = load(RUN_SCHEMA, raw={"system": {"preset": "sn40l-8", "network": [{"link_latency": "100ns"}]}},
               overrides=["system.network[0].kind=r"])
    (dim,) = cfg["system"]["network"]
    assert dim["link_latency"] == pytest.approx(100e-9) and dim["kind"] == "r" and dim["size"] == 8
    late = load(RUN_SCHEMA, raw={}, overrides=["system.preset=sn40l-8", "system.max_seconds=2"])
    assert late["system"]["chips"] == 8 and late["system"]["max_seconds"] == 2.0


def test_a_preset_and_a_contradicting_key_name_the_problem():
    raw = {"system": {"preset": "sn40l-8", "chips": 16}, "workload": {"kind": "collective"}}
    with pytest.raises(ConfigError, match="8 chips, system has 16"):
        system_config(load(RUN_SCHEMA, raw=raw))
    with pytest.raises(ConfigError, match="system.preset"):
        load(RUN_SCHEMA, raw={"system": {"preset": "sn40l-9"}})


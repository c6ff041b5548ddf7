"""Test workloads run by one CU of every grid chip (its peers on the other chips take part), and
a system run from a raw config: what tests/system's grid tests share."""

from contextlib import contextmanager
from typing import ClassVar

import pytest

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, chip_config, system_of
from cluster.jobs.system import simulate_system
from sim.keys import Table
from sim.system.config import SystemConfig
from sim.workloads import WORKLOADS, Capabilities, Workload
from sim.workloads.base import Floorplan


class OneCuParams(Workload):
    """Base of a test workload's parameters (a frozen dataclass: ``kind`` then the KEYS in order)."""

    SECTION: ClassVar[str]
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
    KEYS: ClassVar[Table]
    PROGRAM: ClassVar[type]
    token_unit: ClassVar[str] = "programs run"  # its one work item

    @classmethod
    def from_config(cls, kind, d, chip, issues):
        return cls(kind, *(d[k] for k in cls.KEYS.fields))

    @property
    def work_items(self):
        return 1

    def program(self, cfg):
        return self.PROGRAM(self, cfg)


class OneCu:
    """The program: the CU at (0, 0) of every chip runs ``_run``; ``on_message`` may take messages."""

    def __init__(self, p, cfg):
        self.p, self.cfg = p, cfg
        self.grid = Floorplan(cfg)
        self.cu = self.grid.unit_at(0, 0)

    def start(self, cu):
        return self._run(cu) if cu.uid == self.cu else None


@contextmanager
def registered(params):
    WORKLOADS.register(params.SECTION)(params)
    try:
        yield
    finally:
        WORKLOADS.unregister(params.SECTION)


def workload_fixture(params):
    """A pytest fixture registering the test workload ``params`` while a test runs."""

    @pytest.fixture
    def fixture():
        with registered(params):
            yield

    return fixture


def run_raw(raw: dict, shards: int = 1):
    """(chip config, summary, tables) of a system of grid chips from a raw config."""
    cfg = load(RUN_SCHEMA, raw=raw)
    system = system_of(cfg["system"], chip_config(cfg).spec.dfmodel())
    chip = chip_config(cfg, system=system)
    sc = SystemConfig(system, chip.spec.clock_hz, cfg["system"]["packet_bytes"], "grid", chip.workload, chip=chip)
    done = simulate_system(sc, shards=shards)
    summary, tables = done.summary, done.tables
    return chip, summary, tables

"""Adding a memory policy, a reclamation protocol or a workload takes one module: here each is
defined and registered in this file alone, configured by name with its own keys, and run."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, chip_config
from cluster.jobs.chip import simulate_chip
from mapping.placement import MuRoom
from sim.chip import messages as m
from sim.chip.records import buffer_label
from sim.chip.references import allocate, free
from sim.chip.spec import CU
from sim.chip.units import Replies
from sim.keys import Field, Issue, Table
from sim.memory.policies import POLICIES, Extent, Growth, StorageBase
from sim.workloads import WORKLOADS
from sim.workloads.base import Floorplan, tile_field, tile_of


@dataclass(frozen=True)
class ExactFit:
    """A policy that reserves exactly what a buffer holds, up to a cap per MU (a key of its own)."""

    name: str = "exact-fit"
    exact_cap: int = 1 << 30

    KEYS: ClassVar[dict] = {"exact_cap": Field("size", 1 << 30, "exact-fit: bytes an MU may reserve", min=1)}

    @classmethod
    def from_config(cls, name, memory):
        return cls(name, memory.get("exact_cap") or cls.exact_cap)

    def problems(self, mu):
        return []

    def room(self, mu):
        return MuRoom(mu.capacity, 1)

    def storage(self, mu):
        return ExactFitStorage(self.exact_cap)


class ExactFitStorage(StorageBase):
    def __init__(self, cap):
        super().__init__()
        self.cap = cap
        self.room: dict[int, int] = {}  # bytes reserved per buffer

    def create(self, buf, nbytes):
        self.size[buf] = self.room[buf] = 0
        return self.grow(buf, nbytes)

    def grow(self, buf, nbytes):
        extra = nbytes - self.room[buf]
        if extra <= 0:
            return Growth(0)
        if self.reserved + extra > self.cap:
            return None
        self.room[buf] = nbytes
        self.reserved += extra
        return Growth(extra)

    def shrink(self, buf, nbytes):
        return 0

    def release(self, buf):
        n = self.room.pop(buf)
        self.used -= self.size.pop(buf)
        self.reserved -= n
        return n

    def extents(self):
        return [Extent(0, n, b, n) for b, n in sorted(self.size.items())]


PING = buffer_label(77, "ping")


@dataclass(frozen=True)
class PingParams:
    """A CU allocates a buffer, writes it, reads it back and frees it, ``pings`` times."""

    kind: str = "ping"
    pings: int = 3
    nbytes: int = 1000
    cu: tuple = (0, 0)

    SECTION: ClassVar[str] = "ping"
    token_unit: ClassVar[str] = "pings"  # what its tokens count: round trips done
    KEYS: ClassVar[Table] = Table({"pings": Field("int", 3, "round trips", min=1),
                                   "nbytes": Field("size", 1000, "bytes per buffer", min=1),
                                   "cu": tile_field([0, 0], "[row, col] of the CU")}, doc="ping")

    @classmethod
    def from_config(cls, kind, d, chip, issues: list[Issue]):
        return cls(kind, d["pings"], d["nbytes"], tile_of(d["cu"], "workload.ping.cu", chip.spec, chip.layout, CU,
                                                          issues))

    @property
    def work_items(self):
        return self.pings

    def program(self, cfg):
        return Ping(self, cfg)


class Ping:
    def __init__(self, p, cfg):
        self.p, self.cfg = p, cfg
        self.plan = Floorplan(cfg)

    def start(self, cu):
        return self._run(cu) if cu.uid == self.plan.unit_at(*self.p.cu) else None

    def on_message(self, cu, msg):
        raise RuntimeError("ping takes no messages")

    def _run(self, cu):
        mu = int(self.plan.nearest_mus(cu.uid)[0])
        for i in range(self.p.pings):
            t0 = cu.shard.now
            cu.shard.counts["admitted"] += 1
            ref = yield from allocate(cu, mu, self.p.nbytes, PING)
            cu.send(m.WRITE, mu, nbytes=self.p.nbytes, mu=mu, buf=ref.buf, alloc=ref.alloc)
            tag = cu.request(m.READ_REQ, mu, nbytes=self.p.nbytes, mu=mu, buf=ref.buf, alloc=ref.alloc)
            yield Replies([tag], "memory")
            free(cu, ref)
            cu.shard.counts["finished"] += 1
            cu.shard.record("request", i, t0, cu.shard.now, 1, "ok")


@pytest.fixture
def registered():
    POLICIES.register("exact-fit")(ExactFit)
    WORKLOADS.register("ping")(PingParams)
    yield
    POLICIES.unregister("exact-fit")
    WORKLOADS.unregister("ping")


RAW = {"chip": {"preset": "plasticine", "rows": 4, "cols": 8}, "noc": {"model": "packet"},
       "memory": {"policy": "exact-fit", "exact_cap": "64KiB"},
       "workload": {"kind": "ping", "ping": {"pings": 4, "nbytes": "3000B"}}}


def test_a_policy_and_a_workload_registered_here_run(registered):
    cfg = chip_config(load(RUN_SCHEMA, raw=RAW))
    assert cfg.policy == ExactFit("exact-fit", 64 * 1024)
    s, tables, _, _ = simulate_chip(cfg)
    assert s["completed"] and s["requests"] == 4 and s["work_items"] == 4
    assert (s["tokens"], s["token_unit"]) == (4, "pings")
    # exact fit: the reservation never exceeds the data it holds, and all is returned
    assert s["peak_mu_reserved"] == s["peak_mu_utilization"] > 0
    assert s["leaks"] == s["use_after_free"] == s["double_free"] == 0
    assert set(tables["buffers"]["label"]) == {"ping"}
    assert tables["buffers"]["peak_bytes"] == [3000] * 4


def test_their_keys_are_checked_like_any_other(registered):
    bad = {**RAW, "memory": {"policy": "exact-fit", "exact_cap": "lots"},
           "workload": {"kind": "ping", "ping": {"pingz": 2}}}
    with pytest.raises(ConfigError) as e:
        chip_config(load(RUN_SCHEMA, raw=bad))
    text = str(e.value)
    assert "memory.exact_cap" in text
    assert "workload.ping.pingz: unknown key; did you mean 'workload.ping.pings'?" in text


def test_unregistered_names_are_refused_with_the_known_ones():
    with pytest.raises(ConfigError) as e:
        load(RUN_SCHEMA, raw={**RAW, "workload": {"kind": "ping"}})
    text = str(e.value)
    assert "workload.kind: 'ping' is not one of " in text
    for known in ("dataflow", "kv-decode", "moe", "race", "spec-decode", "collective", "pipeline", "expert-parallel"):
        assert known in text.split("workload.kind:")[1]


def test_a_traffic_pattern_registered_here_is_a_noc_traffic_choice():
    """A mirror pattern (router i sends to n - 1 - i) is bitcomp written another way: the same packets."""
    from cluster.config.noc import NOC_SCHEMA, params_of
    from cluster.jobs.noc import simulate_noc
    from sim.noc.traffic import TRAFFIC_PATTERNS

    TRAFFIC_PATTERNS.register("mirror")(lambda p, src, cycle: p.nodes - 1 - src)
    try:
        hashes = {}
        for pattern in ("mirror", "bitcomp"):
            sets = [f"noc.traffic={pattern}", "noc.k=4", "noc.warmup_cycles=100", "noc.measure_cycles=300"]
            summary = simulate_noc(params_of(load(NOC_SCHEMA, None, sets), 0.2))[0]
            assert summary["measured_packets"] > 0
            hashes[pattern] = summary["result_hash"]
        assert hashes["mirror"] == hashes["bitcomp"]
    finally:
        TRAFFIC_PATTERNS.unregister("mirror")

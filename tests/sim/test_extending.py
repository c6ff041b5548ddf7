"""Adding a memory policy, a reclamation protocol or a workload takes one module: here each is
defined and registered in this file alone, configured by name with its own keys, and run. The
config follows what a workload declares (its capabilities: where it runs, whether it maps a
graph or preempts; its own checks), never its name: a system workload, a graph-mapping one and a
preempting one defined here are treated as the built-in ones are."""

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, chip_config, system_config
from cluster.jobs.chip import ChipJob, simulate_chip
from cluster.jobs.job import execute
from cluster.jobs.system import simulate_system
from mapping.placement import MuRoom
from sim.chip import messages as m
from sim.chip.records import buffer_label
from sim.chip.references import allocate, free
from sim.chip.spec import CU
from sim.chip.units import Replies
from sim.keys import Field, Issue, Table
from sim.memory.policies import POLICIES, Extent, Growth, PolicyParams, StorageBase
from sim.serving.metrics import Objectives, RequestLog, serving_figures
from sim.system.shard import Recv
from sim.workloads import WORKLOADS, Capabilities, Workload
from sim.workloads.base import Floorplan, tile_field, tile_of


@dataclass(frozen=True)
class ExactFit(PolicyParams):
    """A policy that reserves exactly what a buffer holds, up to a cap per MU (a key of its own);
    it takes PolicyParams's defaults for the rest (no blocks, no spilling, nothing to estimate)."""

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
class PingParams(Workload):
    """A CU allocates a buffer, writes it, reads it back and frees it, ``pings`` times."""

    kind: str = "ping"
    pings: int = 3
    nbytes: int = 1000
    cu: tuple = (0, 0)

    SECTION: ClassVar[str] = "ping"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
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
    done = simulate_chip(cfg)
    s, tables = done.summary, done.tables
    assert s["completed"] and s["requests"] == 4 and s["work_items"] == 4
    assert (s["tokens"], s["token_unit"]) == (4, "pings")
    # exact fit: the reservation never exceeds the data it holds, and all is returned
    assert s["peak_mu_reserved"] == s["peak_mu_utilization"] > 0
    assert s["leaks"] == s["use_after_free"] == s["double_free"] == 0
    assert set(tables["buffers"]["label"]) == {"ping"}
    assert list(tables["buffers"]["peak_bytes"]) == [3000] * 4



@dataclass(frozen=True)
class PatientPingParams(PingParams):
    """Ping declaring that it serves requests it can preempt: the config then takes memory.on_oom = "preempt"."""

    kind: str = "patient-ping"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False, preempts=True)


def test_preemption_follows_the_capability_a_workload_declares(registered):
    raw = {**RAW, "memory": {**RAW["memory"], "on_oom": "preempt"}}
    with pytest.raises(ConfigError) as e:
        chip_config(load(RUN_SCHEMA, raw=raw))
    assert "memory.on_oom: preempt: ping cannot preempt; the workloads that can are " in str(e.value)
    assert "patient-ping" not in str(e.value)
    WORKLOADS.register("patient-ping")(PatientPingParams)
    try:
        cfg = chip_config(load(RUN_SCHEMA, raw={**raw, "workload": {"kind": "patient-ping"}}))
        assert (cfg.workload.kind, cfg.on_oom) == ("patient-ping", "preempt")
        with pytest.raises(ConfigError) as e:  # the refusal of the one that cannot names the one that can
            chip_config(load(RUN_SCHEMA, raw=raw))
        assert "patient-ping" in str(e.value).split("the workloads that can are ")[1]
    finally:
        WORKLOADS.unregister("patient-ping")


class ServedPing(Ping):
    """Ping whose round trips are requests served, each logged as its scheduler would (one token)."""

    def _run(self, cu):
        yield from super()._run(cu)
        for i in range(self.p.pings):
            cu.shard.log(RequestLog(i, 0, 0, (cu.shard.now,), 0, "ok"))


@dataclass(frozen=True)
class ServedPingParams(PingParams):
    """Ping declaring the table its serving figures give (run_requests: its columns under "requests")."""

    kind: str = "served-ping"
    TABLES: ClassVar[tuple[str, ...]] = ("run_requests",)

    def program(self, cfg):
        return ServedPing(self, cfg)

    def serving_figures(self, logged, clock_hz, seconds):
        return serving_figures([x for x in logged if isinstance(x, RequestLog)], [], clock_hz, seconds, Objectives())


@dataclass(frozen=True)
class ForgetfulPingParams(ServedPingParams):
    """Served ping that gives run_requests' columns without declaring the table."""

    kind: str = "forgetful-ping"
    TABLES: ClassVar[tuple[str, ...]] = ()


def test_a_run_writes_the_tables_its_workload_declares_and_no_other(registered):
    every_run = {"run_summary", "run_mu_series", "run_buffers", "run_links", "run_energy"}
    assert set(execute(ChipJob(load(RUN_SCHEMA, raw=RAW)), quiet=True).tables) == every_run
    for cls in (ServedPingParams, ForgetfulPingParams):
        WORKLOADS.register(cls.kind)(cls)
    try:
        served = execute(ChipJob(load(RUN_SCHEMA, raw={**RAW, "workload": {"kind": "served-ping"}})), quiet=True)
        assert set(served.tables) == every_run | {"run_requests"}
        requests = served.tables["run_requests"]
        # the default 3 pings, a token each
        assert requests["request"].to_pylist() == [0, 1, 2] and requests["tokens"].to_pylist() == [1] * 3
        with pytest.raises(ValueError, match="forgetful-ping gave columns of tables it does not declare.*requests"):
            execute(ChipJob(load(RUN_SCHEMA, raw={**RAW, "workload": {"kind": "forgetful-ping"}})), quiet=True)
    finally:
        for cls in (ServedPingParams, ForgetfulPingParams):
            WORKLOADS.unregister(cls.kind)

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
            summary = simulate_noc(params_of(load(NOC_SCHEMA, None, sets), 0.2)).summary
            assert summary["measured_packets"] > 0
            hashes[pattern] = summary["result_hash"]
        assert hashes["mirror"] == hashes["bitcomp"]
    finally:
        TRAFFIC_PATTERNS.unregister("mirror")


@dataclass(frozen=True)
class EchoParams(Workload):
    """A system workload: chip 0 sends ``nbytes`` to chip 1, which sends them back, ``rounds`` times."""

    kind: str = "echo"
    nbytes: int = 1 << 16
    rounds: int = 2

    SECTION: ClassVar[str] = "echo"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=True, maps_graph=False)
    WORK_UNIT: ClassVar[str] = "round trips"
    KEYS: ClassVar[Table] = Table({"nbytes": Field("size", 1 << 16, "bytes each way", min=1),
                                   "rounds": Field("int", 2, "round trips", min=1)}, doc="echo")

    @classmethod
    def from_config(cls, kind, d, chip, issues):
        return cls(kind, d["nbytes"], d["rounds"])

    @property
    def work_items(self):
        return self.rounds

    def system_program(self, cfg):
        return Echo(self)

    def system_figures(self, records, cfg):
        return {"round_trip_cycles": [r.end - r.start for r in records]}


class Echo:
    def __init__(self, p):
        self.p = p

    def start(self, chip):
        return self._run(chip) if chip.cid < 2 else None

    def _run(self, chip):
        shard, other = chip.shard, 1 - chip.cid
        for r in range(self.p.rounds):
            t0 = shard.now
            if chip.cid == 0:
                shard.counts["created"] += 1
                chip.send(other, self.p.nbytes, r)
            yield Recv([(other, r)])
            if chip.cid == 1:
                chip.send(other, self.p.nbytes, r)
            else:
                shard.record("echo", 0, r, t0, shard.now, self.p.nbytes)
                shard.counts["finished"] += 1


@dataclass(frozen=True)
class SketchParams(Workload):
    """A chip workload that maps `rdasim map`'s graph keys (here it only keeps the graph's kind)
    and cannot run with memory.on_oom = "fail" (its own config check)."""

    kind: str = "sketch"
    graph: str = ""

    SECTION: ClassVar[str] = "sketch"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=True)
    KEYS: ClassVar[Table] = Table({"plan": Field("str", "", "plan.json (else the graph keys)")}, doc="sketch")

    @classmethod
    def config_issues(cls, run):
        return [Issue("memory.on_oom", "sketch cannot fail")] if run["memory"]["on_oom"] == "fail" else []

    @classmethod
    def from_config(cls, kind, d, chip, issues):
        graph = d["graph"]
        if graph["kind"] and graph[graph["kind"]]["hidden"] is None:  # what mapping would trip on
            raise AssertionError("from_config ran before the graph keys were checked")
        return cls(kind, graph["kind"])

    @property
    def work_items(self):
        return 0

    def program(self, cfg):
        return Ping(PingParams(), cfg)


@pytest.fixture
def more_workloads():
    for cls in (PingParams, EchoParams, SketchParams):
        WORKLOADS.register(cls.kind)(cls)
    yield
    for cls in (PingParams, EchoParams, SketchParams):
        WORKLOADS.unregister(cls.kind)


RING = [{"kind": "r", "size": 2, "link_bandwidth": "64GB/s", "link_latency": "500ns", "parallelism": "TP"}]


def test_a_system_workload_registered_here_runs_on_box_chips_with_its_own_figures(more_workloads):
    cfg = system_config(load(RUN_SCHEMA, raw={"system": {"chips": 2, "chip": "SN30", "network": RING},
                                              "workload": {"kind": "echo", "echo": {"nbytes": 100_000}}}))
    summary = simulate_system(cfg).summary
    clock = 1.25e9  # SN30
    one_way = math.ceil(100_000 / (64e9 / clock)) + round(500e-9 * clock)  # serialisation, then the latency
    assert summary["round_trip_cycles"] == [2 * one_way] * 2
    assert summary["status"] == "completed"


def test_where_a_workload_runs_follows_its_system_member(more_workloads):
    with pytest.raises(ConfigError) as e:  # a system workload on one chip
        chip_config(load(RUN_SCHEMA, raw={**RAW, "memory": {}, "workload": {"kind": "echo"}}))
    assert "workload.kind: echo runs on a system of chips" in str(e.value)
    with pytest.raises(ConfigError) as e:  # a chip workload on box chips: the refusal names the system ones
        system_config(load(RUN_SCHEMA, raw={"system": {"chips": 2, "network": RING}, "workload": {"kind": "ping"}}))
    assert "ping runs on one chip; a [system] runs collective, echo, expert-parallel, pipeline" in str(e.value)


def test_a_graph_mapping_workload_takes_the_map_keys_and_they_are_checked_before_it_is_built(more_workloads):
    raw = {**RAW, "memory": {}, "workload": {"kind": "sketch", "sketch": {"graph": {"kind": "llm", "llm": {
        "heads": 4, "seq": 64, "layers": 1, "global_batch": 1}}}}}
    with pytest.raises(ConfigError) as e:
        chip_config(load(RUN_SCHEMA, raw=raw))
    assert "workload.sketch.graph.llm.hidden: is required" in str(e.value)
    raw["workload"]["sketch"]["graph"]["llm"]["hidden"] = 256
    assert chip_config(load(RUN_SCHEMA, raw=raw)).workload == SketchParams("sketch", "llm")
    with pytest.raises(ConfigError) as e:  # its own check, also before it is built
        chip_config(load(RUN_SCHEMA, raw={**raw, "memory": {"on_oom": "fail"}}))
    assert "memory.on_oom: sketch cannot fail" in str(e.value)
    with pytest.raises(ConfigError) as e:  # a workload that does not map a graph has no graph keys
        load(RUN_SCHEMA, raw={**RAW, "workload": {"kind": "ping", "ping": {"graph": {"kind": "llm"}}}})
    assert "workload.ping.graph: unknown key" in str(e.value)


def test_grid_chips_of_a_system_run_the_chip_workloads_that_map_a_graph(more_workloads):
    system = {"chips": 2, "fidelity": "grid", "network": RING}
    raw = {**RAW, "memory": {}, "system": system, "workload": {"kind": "sketch"}}
    assert system_config(load(RUN_SCHEMA, raw=raw)).workload == SketchParams("sketch", "")
    with pytest.raises(ConfigError) as e:
        system_config(load(RUN_SCHEMA, raw={**raw, "workload": {"kind": "ping"}}))
    assert "grid-fidelity chips run a plan mapped over the system (dataflow, sketch)" in str(e.value)

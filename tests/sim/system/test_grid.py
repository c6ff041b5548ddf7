"""Grid-fidelity chips of a system: a collective's data crosses the sender's NoC to an IO
unit, the chip network, and the receiver's NoC; a mapped TP plan runs on every chip with
its all-reduces as such messages."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.system import simulate_system
from sim.chip.collectives import chunk, collective
from sim.keys import Field, Table
from tests.paths import EXAMPLES
from tests.sim.system.one_cu import OneCu, OneCuParams, run_raw, workload_fixture

LINK_BPC = 25  # 25 GB/s at plasticine's 1 GHz: bytes per cycle
LAT = 500  # 500 ns at 1 GHz
FLIT = 64  # plasticine's 512-bit flits
ROWS, COLS = 4, 8


class OneCollective(OneCu):
    def on_message(self, cu, msg):
        raise RuntimeError("the collective's data is taken as replies")

    def _run(self, cu):
        place = self.cfg.system
        cu.shard.counts["admitted"] += 1
        yield from collective(cu, self.p.op, place.group("TP"), place.chip, self.p.nbytes, 0, 0, 0.0)
        cu.shard.counts["finished"] += 1


@dataclass(frozen=True)
class OneCollectiveParams(OneCuParams):
    """The CU at (0, 0) of every chip runs one collective with its peers on the TP group."""

    kind: str = "one-collective"
    op: str = "all_reduce"
    nbytes: int = 4096

    SECTION: ClassVar[str] = "one-collective"
    KEYS: ClassVar[Table] = Table({"op": Field("str", "all_reduce", "collective"),
                                   "nbytes": Field("size", 4096, "bytes each chip contributes", min=1)},
                                  doc="one collective")
    PROGRAM: ClassVar[type] = OneCollective


one_collective = workload_fixture(OneCollectiveParams)


def _run(op: str, p: int, nbytes: int, kind: str = "r", shards: int = 1):
    raw = {"chip": {"preset": "plasticine", "rows": ROWS, "cols": COLS}, "noc": {"model": "packet"},
           "workload": {"kind": "one-collective", "one-collective": {"op": op, "nbytes": nbytes}},
           "system": {"chips": p, "fidelity": "grid",
                      "network": [{"kind": kind, "size": p, "link_bandwidth": "25GB/s", "link_latency": "500ns",
                                   "parallelism": "TP"}]}}
    _, summary, _ = run_raw(raw, shards)
    assert summary["completed"]
    return summary


def _noc_crossing(nbytes: int) -> int:
    """Most a message's crossing of one chip's NoC (CU to IO unit or back) may take: its flits, 5 % for
    packet heads and for the two directions meeting at the IO tile's router, and 4 cycles a hop."""
    return int(1.05 * -(-nbytes // FLIT)) + 4 * (ROWS + COLS)


@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("op, steps", [("all_reduce", 2), ("all_gather", 1), ("reduce_scatter", 1)])
def test_a_ring_collective_costs_its_link_steps_plus_two_noc_crossings_a_step(one_collective, op, steps, p):
    s = 1 << 18
    c = chunk(s, p)
    n = steps * (p - 1)  # ring steps
    t = _run(op, p, s)["sim_cycles"]
    link_bound = n * (LAT + -(-c // LINK_BPC))  # the box chips' closed form: alpha = the link's latency
    assert link_bound < t <= link_bound + n * 2 * _noc_crossing(c)
    # every step moves one chunk from every chip to the next
    assert _run(op, p, s)["bytes_total"] == n * p * c


def test_all_to_all_on_fully_connected_grid_chips(one_collective):
    s, p = 1 << 18, 4
    c = chunk(s, p)
    summary = _run("all_to_all", p, s, kind="fc")
    # one IO port per dimension: a chip's p - 1 pieces leave one after another; the first piece's
    # crossing to the IO unit and the last one's from it are not hidden behind the link
    bound = (p - 1) * -(-c // LINK_BPC) + LAT
    assert bound < summary["sim_cycles"] <= bound + 2 * _noc_crossing(c)
    assert summary["bytes_total"] == p * (p - 1) * c


def test_chips_grouped_into_shards_give_the_same_collective(one_collective):
    hashes = {_run("all_reduce", 4, 1 << 16, shards=k)["result_hash"] for k in (1, 2, 4)}
    assert len(hashes) == 1


# ------------------------------------------------------------------ a mapped TP plan on every chip
def _tp_raw(chips: int, parallelism: str = "TP", fidelity: str = "grid", kind: str = "dataflow") -> dict:
    wl = {"kind": kind}
    if kind == "dataflow":
        wl["dataflow"] = {"graph": {"kind": "llm", "name": "tiny", "word": 2,
                                    "llm": {"hidden": 256, "heads": 4, "seq": 128, "layers": 1, "global_batch": 1,
                                            "micro_batch": 1, "tile_size": 32}},
                          "mapping": {"time_limit": "10s"}}
    return {"chip": {"preset": "plasticine", "rows": 8, "cols": 8}, "workload": wl,
            "system": {"chips": chips, "fidelity": fidelity,
                       "network": [{"kind": "r", "size": chips, "link_bandwidth": "25GB/s", "link_latency": "500ns",
                                    "parallelism": parallelism}]}}


STEPS = {"all_reduce": lambda p: 2 * (p - 1), "all_gather": lambda p: p - 1, "reduce_scatter": lambda p: p - 1,
         "all_to_all": lambda p: p - 1}  # chunks of S / p a chip sends per collective


def _chip_bytes(w, p: int) -> int:
    """Bytes one chip sends to the others: every CU of a kernel with collectives, for each tile and
    each collective, its steps' chunks of its share of the tile (ring and direct alike); an
    all-to-all of routed tokens moves what the routing says instead (tests/system/test_moe_exchange.py)."""
    total = 0
    for part in w.partitions:
        for slot in part.slots:
            share = sum(part.buffers[b].stripes[s].tile_bytes for b, s in slot.writes) + slot.dram_write
            total += sum(part.tiles * STEPS[c](p) * chunk(share, p) for c in slot.collectives
                         if not (c == "all_to_all" and slot.exchange))
    return total * w.passes


@pytest.fixture(scope="module")
def tp2():
    return system_config(load(RUN_SCHEMA, raw=_tp_raw(2)))


def test_a_mapped_tp_plan_all_reduces_every_output_tile_across_the_chips(tp2, ray_session):
    w = tp2.workload
    assert w.tp == 2
    one = simulate_system(tp2, shards=1).summary
    assert one["completed"] and one["chips"] == 2
    assert one["bytes_total"] == 2 * _chip_bytes(w, 2) > 0
    # a chip per shard, in-process or as Ray actors: the same run
    assert simulate_system(tp2, shards=2).summary["result_hash"] == one["result_hash"]
    assert simulate_system(tp2, shards=2, backend="ray").summary["result_hash"] == one["result_hash"]


def test_no_grid_chip_hands_a_message_over_before_its_bound(tp2, monkeypatch):
    """Windows longer than a link's latency are safe only if every chip's earliest hand-over is
    a true lower bound: check it against every message the chips hand over in the next epoch
    (one that arrived from another chip meanwhile may be answered from its arrival on)."""
    from sim.system.grid import GridChip

    bound: dict[int, float] = {}  # chip -> its bound at the last epoch's end, lowered by arrivals since
    checked = []
    advance, hand_over, arrive = GridChip.advance, GridChip.earliest_hand_over, GridChip.arrive

    def watched_advance(self, t0, t1):
        out = advance(self, t0, t1)
        checked.extend((m.sent, bound.get(self.cid, 0.0)) for m in out)
        return out

    def watched_bound(self):
        bound[self.cid] = hand_over(self)
        return bound[self.cid]

    def watched_arrive(self, cycle, dim, row):
        bound[self.cid] = min(bound.get(self.cid, 0.0), cycle)
        arrive(self, cycle, dim, row)

    monkeypatch.setattr(GridChip, "advance", watched_advance)
    monkeypatch.setattr(GridChip, "earliest_hand_over", watched_bound)
    monkeypatch.setattr(GridChip, "arrive", watched_arrive)
    two = simulate_system(tp2, shards=2)
    assert len(checked) > 100 and all(sent >= b for sent, b in checked)
    assert min(sent - b for sent, b in checked) < 100  # and not so loose as to say nothing
    assert two.summary["result_hash"] == simulate_system(tp2, shards=1).summary["result_hash"]


def test_a_mapped_moe_layer_runs_its_all_to_alls_between_grid_chips():

    cfg = system_config(load(RUN_SCHEMA, EXAMPLES / "system_moe_grid.toml"))
    kinds = {c for part in cfg.workload.partitions for s in part.slots for c in s.collectives}
    assert kinds == {"all_reduce", "all_to_all"}
    assert {s.kernel for part in cfg.workload.partitions for s in part.slots if s.exchange} == {"Dispatch", "Combine"}
    done = simulate_system(cfg)
    summary, tables = done.summary, done.tables
    # the all-reduces' padded chunks, and the tokens that landed on the other chip (only data crosses:
    # references, -1s and weight returns carry none)
    assert summary["completed"]
    assert summary["bytes_total"] == 2 * _chip_bytes(cfg.workload, 2) + sum(tables["chips"]["landing_bytes"])
    assert simulate_system(cfg, shards=2).summary["result_hash"] == summary["result_hash"]  # a chip per shard


@pytest.mark.parametrize("raw, key, words", [
    (_tp_raw(2, kind="kv-decode"), "workload.kind", "grid-fidelity chips run a plan mapped over the system"),
    (_tp_raw(2, parallelism="PP"), "system.network[0].parallelism", "grid-fidelity chips run TP and DP plans"),
])
def test_what_grid_chips_cannot_run_is_refused_by_name(raw, key, words):
    with pytest.raises(ConfigError) as e:
        system_config(load(RUN_SCHEMA, raw=raw))
    assert any(i.path == key and words in i.message for i in e.value.issues), e.value.issues

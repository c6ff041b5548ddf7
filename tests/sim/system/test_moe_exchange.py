"""MoE expert parallelism over grid chips: the dispatch and combine all-to-alls move exactly the
tokens the routing sends to each chip's experts, into landing buffers the receiving chip
allocates through its memory policy, and the reclamation protocol frees them across chips."""

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.system import simulate_system
from sim.chip.exchange import exchange, exchange_counts, fixed_slots, is_landing, take_landing_reference
from sim.keys import Field, Table
from sim.workloads.moe import route
from tests.sim.system.one_cu import OneCu, OneCuParams, run_raw, workload_fixture

TOKEN_BYTES = 256 * 2  # hidden x word
BLOCK = 4096  # the virtual policy's default block


def _raw(chips: int, experts: int = 8, policy: str = "virtual", reclaim: str = "partial-free",
         skew: float = 1.0) -> dict:
    return {"chip": {"preset": "plasticine", "rows": 8, "cols": 8}, "noc": {"model": "packet"},
            "memory": {"policy": policy, "reclaim": reclaim},
            "workload": {"kind": "dataflow", "dataflow": {
                "skew": skew,
                "graph": {"kind": "moe", "name": "moe", "word": 2,
                          "moe": {"hidden": 256, "heads": 4, "seq": 128, "experts": experts, "top_k": 2, "layers": 1,
                                  "global_batch": 1, "capacity_factor": 1.25, "tile_size": 32}},
                "mapping": {"partitions": 5, "time_limit": "10s"}}},
            "system": {"chips": chips, "fidelity": "grid",
                       "network": [{"kind": "fc", "size": chips, "link_bandwidth": "100GB/s",
                                    "link_latency": "500ns", "parallelism": "TP"}]}}


@lru_cache(maxsize=None)
def _run(chips: int, policy: str = "virtual", reclaim: str = "partial-free", skew: float = 1.0, shards: int = 1):
    cfg = system_config(load(RUN_SCHEMA, raw=_raw(chips, policy=policy, reclaim=reclaim, skew=skew)))
    done = simulate_system(cfg, shards=shards)
    summary, tables = done.summary, done.tables
    return cfg, summary, tables


def _landing(cfg, skew: float) -> dict[int, list[int]]:
    """Brute force: every token copy of every tile, the chip holding the token (contiguous blocks of
    the tile's tokens) and the chip of its expert (contiguous blocks of experts); a copy that
    crosses chips lands once on the expert's chip (dispatch) and once back on the token's
    (combine). Returns chip -> token counts of its landing buffers (one per tile, phase, peer)."""
    (x,) = {s.exchange.route for part in cfg.workload.partitions for s in part.slots if s.exchange}
    experts, top_k, slots = x
    p = cfg.graph.chips
    tokens = experts * slots // top_k
    tiles = cfg.workload.partitions[0].tiles
    out: dict[int, list[int]] = {c: [] for c in range(p)}
    for tile in range(tiles):
        routes = route(cfg.seed, tile, tokens, experts, top_k, skew)
        pair = {}
        for t in range(tokens):
            src = t * p // tokens
            for e in routes[t].tolist():
                dst = e // (experts // p)
                if dst != src:
                    pair[src, dst] = pair.get((src, dst), 0) + 1
        for (src, dst), n in pair.items():
            out[dst].append(n)  # dispatch: lands on the experts' chip
            out[src].append(n)  # combine: the results land back on the tokens' chip
    return out


def test_exchange_counts_of_a_hand_made_routing():
    # 4 tokens, 8 experts over 2 chips: tokens 0, 1 live on chip 0, experts 0-3 too
    routes = np.array([[0, 5], [1, 2], [7, 6], [3, 4]])
    assert exchange_counts(routes, 2, 8).tolist() == [[3, 1], [1, 3]]


@pytest.mark.parametrize("reclaim", ["refcount", "refcount-gated", "partial-free"])
def test_each_chip_lands_exactly_the_tokens_routed_to_it_and_frees_every_landing_buffer(reclaim):
    cfg, summary, tables = _run(2, reclaim=reclaim)
    assert summary["completed"]
    want = _landing(cfg, 1.0)
    chips = tables["chips"]
    assert chips["landing_bytes"] == [sum(want[c]) * TOKEN_BYTES for c in range(2)]
    assert chips["landing_buffers"] == [len(want[c]) for c in range(2)]  # every one freed (logged at its free)
    # virtual: blocks on demand, so a buffer holds its routed bytes rounded up to blocks
    assert chips["landing_reserved_bytes"] == [sum(math.ceil(n * TOKEN_BYTES / BLOCK) * BLOCK for n in want[c])
                                               for c in range(2)]
    # the references crossed chips (the sender's drop went back to the receiver's MU) and nothing leaked
    assert (summary["use_after_free"], summary["double_free"], summary["premature_free"], summary["leaks"]) == \
        (0, 0, 0, 0)


def test_realloc_copy_grows_the_landing_buffers_by_copying():
    cfg, summary, tables = _run(2, policy="realloc-copy")
    want = _landing(cfg, 1.0)
    assert summary["completed"] and summary["leaks"] == 0
    assert tables["chips"]["landing_bytes"] == [sum(want[c]) * TOKEN_BYTES for c in range(2)]
    assert all(r >= b for r, b in zip(tables["chips"]["landing_reserved_bytes"], tables["chips"]["landing_bytes"]))


def test_the_hot_experts_chip_lands_more_than_the_balanced_share():
    cfg, summary, tables = _run(4, skew=1.2)
    assert summary["completed"]
    want = {c: sum(n) for c, n in _landing(cfg, 1.2).items()}
    got = tables["chips"]["landing_bytes"]
    assert got == [want[c] * TOKEN_BYTES for c in range(4)]
    factor = want[0] / np.mean(list(want.values()))  # experts 0 and 1, the most popular, live on chip 0
    assert got[0] / np.mean(got) == pytest.approx(factor) and factor > 1.2
    assert max(got) == got[0]


def test_uniform_routing_lands_about_the_same_everywhere():
    _, summary, tables = _run(4, skew=0.0)
    got = tables["chips"]["landing_bytes"]
    assert max(got) / np.mean(got) < max(_run(4, skew=1.2)[2]["chips"]["landing_bytes"]) / np.mean(
        _run(4, skew=1.2)[2]["chips"]["landing_bytes"])


def test_any_grouping_of_chips_into_shards_and_either_backend_give_the_same_exchange(ray_session):
    _, one, _ = _run(4)
    for shards in (2, 4):
        assert _run(4, shards=shards)[1]["result_hash"] == one["result_hash"]
    cfg = _run(4)[0]
    assert simulate_system(cfg, shards=2, backend="ray").summary["result_hash"] == one["result_hash"]


def test_experts_that_do_not_spread_over_the_tp_group_are_refused_by_name():
    with pytest.raises(ConfigError) as e:
        system_config(load(RUN_SCHEMA, raw=_raw(4, experts=6)))
    assert any(i.path == "workload.dataflow" and "6 experts do not spread evenly" in i.message
               for i in e.value.issues), e.value.issues


# ------------------------------------------------------------------ one exchange with hand-made counts
class OneExchange(OneCu):
    def __init__(self, p, cfg):
        super().__init__(p, cfg)
        self.mu = int(self.grid.nearest_mus(self.cu)[0])

    def on_message(self, cu, msg):
        assert is_landing(msg)
        take_landing_reference(cu, msg)

    def _run(self, cu):
        place, p = self.cfg.system, self.p
        group = place.group("TP")
        n = len(group)
        c = np.array(p.counts).reshape(n, n)
        me = group.index(place.chip)
        cu.shard.counts["admitted"] += 1
        ok = yield from exchange(cu, group, place.chip, c[me].tolist(), c[:, me].tolist(), [p.bound] * n,
                                 p.token_bytes, self.mu, fixed_slots(self.cfg), 0, 0, self.cfg.reclaim,
                                 self.cfg.sizing.max_packet_bytes)
        if ok:
            cu.shard.counts["finished"] += 1


@dataclass(frozen=True)
class OneExchangeParams(OneCuParams):
    """The CU at (0, 0) of every chip sends ``counts[g][h]`` tokens to chip h's; each lands in the
    MU nearest the receiving CU (``bound`` tokens at most from a peer)."""

    kind: str = "one-exchange"
    counts: tuple = ()
    token_bytes: int = 1024
    bound: int = 64

    SECTION: ClassVar[str] = "one-exchange"
    KEYS: ClassVar[Table] = Table({"counts": Field("list", [], "tokens chip g sends chip h, row by row",
                                                   item=Field("int", min=0)),
                                   "token_bytes": Field("size", 1024, "bytes of a token", min=1),
                                   "bound": Field("int", 64, "most tokens a peer may send", min=1)},
                                  doc="one exchange")
    PROGRAM: ClassVar[type] = OneExchange


one_exchange = workload_fixture(OneExchangeParams)


def _exchange(counts: list[list[int]], policy: str, reclaim: str = "partial-free", on_oom: str = "stall",
              bound: int = 64, memory: dict | None = None, shards: int = 1):
    p = len(counts)
    raw = {"chip": {"preset": "plasticine", "rows": 4, "cols": 8}, "noc": {"model": "packet"},
           "memory": {"policy": policy, "reclaim": reclaim, "on_oom": on_oom, **(memory or {})},
           "workload": {"kind": "one-exchange",
                        "one-exchange": {"counts": [x for row in counts for x in row], "bound": bound}},
           "system": {"chips": p, "fidelity": "grid",
                      "network": [{"kind": "fc", "size": p, "link_bandwidth": "25GB/s", "link_latency": "500ns",
                                   "parallelism": "TP"}]}}
    return run_raw(raw, shards)


HAND = [[0, 5, 40, 0], [3, 0, 0, 1], [17, 2, 0, 9], [0, 0, 33, 0]]  # tokens chip g sends chip h


def _received(counts):
    return [[counts[g][h] for g in range(len(counts)) if counts[g][h]] for h in range(len(counts))]


@pytest.mark.parametrize("reclaim", ["refcount", "refcount-gated", "partial-free"])
def test_a_hand_made_exchange_lands_every_token_and_frees_every_buffer(one_exchange, reclaim):
    _, summary, tables = _exchange(HAND, "virtual", reclaim)
    assert summary["completed"]
    got = _received(HAND)
    chips = tables["chips"]
    assert chips["landing_bytes"] == [sum(g) * 1024 for g in got]
    assert chips["landing_buffers"] == [len(g) for g in got]
    assert chips["landing_reserved_bytes"] == [sum(math.ceil(n * 1024 / BLOCK) * BLOCK for n in g) for g in got]
    assert (summary["premature_free"], summary["use_after_free"], summary["double_free"], summary["leaks"]) == \
        (0, 0, 0, 0)


def test_a_static_slot_holds_every_landing_buffer_it_can(one_exchange):
    chip, summary, tables = _exchange(HAND, "static-multi", memory={"buffers_per_mu": 4})
    slot = chip.spec.mu_bytes // 4
    assert summary["completed"] and summary["leaks"] == 0
    got = _received(HAND)
    assert tables["chips"]["landing_bytes"] == [sum(g) * 1024 for g in got]
    assert tables["chips"]["landing_reserved_bytes"] == [len(g) * slot for g in got]


def test_a_worst_case_beyond_the_static_slot_fails_or_stalls_as_on_oom_says(one_exchange):
    # a peer may send 80 tokens of 1 KiB: more than a quarter of an MU, the static slot
    chip, summary, _ = _exchange(HAND, "static-multi", on_oom="fail", bound=80, memory={"buffers_per_mu": 4})
    assert 80 * 1024 > chip.spec.mu_bytes // 4
    assert not summary["completed"] and summary["leaks"] == 0  # refused: nothing sent, nobody waits
    _, summary, _ = _exchange(HAND, "static-multi", on_oom="stall", bound=80, memory={"buffers_per_mu": 4})
    assert summary["status"] == "deadlocked"


def test_realloc_copy_grows_a_landing_buffer_by_copying_what_arrived(one_exchange):
    _, summary, tables = _exchange(HAND, "realloc-copy")
    assert summary["completed"] and summary["leaks"] == 0
    assert tables["chips"]["landing_bytes"] == [sum(g) * 1024 for g in _received(HAND)]


def test_a_hand_made_exchange_is_the_same_for_any_grouping(one_exchange):
    hashes = {_exchange(HAND, "virtual", shards=k)[1]["result_hash"] for k in (1, 2, 4)}
    assert len(hashes) == 1

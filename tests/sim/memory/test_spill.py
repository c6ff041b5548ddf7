"""memory.spill = "nearest": buffers spread over MUs at run time (sim/chip/spill.py).

Known answers: the block map of a spilled buffer by hand; where the overflow lands against a
brute-force nearest MU with room; a remote read's extra cycles against the NoC's zero-load
closed form plus the translation cost; the shadow oracle across spills under every
reclamation protocol; the same result for any shard count; the first out-of-memory event of
an over-committed decode run at >= 90 % chip-wide utilisation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from cluster.config.loader import ConfigError
from cluster.jobs.chip import simulate_chip
from sim.chip import messages as m
from sim.chip.config import NI_LATENCY
from sim.chip.records import buffer_label
from sim.chip.references import allocate, free
from sim.chip.spec import unit_layout
from sim.chip.spill import REMOTE_LOOKUP
from sim.chip.units import Replies, Sleep
from sim.keys import Table
from sim.memory.policies import MuGeometry, policy_params
from sim.memory.policies.virtual import LOCAL
from sim.workloads import Capabilities, Workload
from sim.workloads.base import Floorplan
from tests.sim.chip.chiprun import config, run

KIB = 1024


# ---------------------------------------------------------------------- the block map by hand
def storage(capacity: int, block: int):
    return policy_params("virtual", block_bytes=block, spill="nearest").storage(MuGeometry(capacity))


def test_a_spilled_buffer_maps_its_virtual_blocks_to_the_mus_holding_them():
    s = storage(16 * KIB, 4 * KIB)  # 4 blocks
    s.create(1, 8 * KIB)
    s.create(2, 4 * KIB)
    # buffer 1 wants 5 blocks: it has 2, one more fits here, two must come from elsewhere
    assert s.take(1, 20 * KIB) == (4 * KIB, 2)
    s.add_remote(1, 7, 1)
    s.add_remote(1, 9, 1)
    assert s.blocks(1) == 5 and s.remote_blocks(1) == {7: 1, 9: 1}
    assert s.held(1, 0, 20 * KIB) == {LOCAL: (0, 12 * KIB), 7: (0, 4 * KIB), 9: (0, 4 * KIB)}
    assert s.held(1, 10 * KIB, 18 * KIB) == {LOCAL: (10 * KIB, 12 * KIB), 7: (0, 4 * KIB), 9: (0, 2 * KIB)}
    s.set_size(1, 18 * KIB)
    assert s.used == 12 * KIB and s.reserved == 16 * KIB  # only what lies here counts here
    # truncating to 6 KiB (the size first, as the MU does) keeps virtual blocks 0 and 1, both
    # here: one block here goes back, and the blocks elsewhere leave the map
    s.set_size(1, 6 * KIB)
    assert s.used == 6 * KIB
    assert s.shrink(1, 6 * KIB) == 4 * KIB
    assert s.remote_blocks(1) == {} and s.blocks(1) == 2
    assert s.release(1) == 8 * KIB and s.used == 0 and s.reserved == 4 * KIB


def test_blocks_of_one_mu_are_its_share_of_the_buffer_in_virtual_order():
    s = storage(8 * KIB, 4 * KIB)  # 2 blocks
    s.create(1, 4 * KIB)
    s.add_remote(1, 5, 1)  # virtual block 1
    assert s.take(1, 12 * KIB) == (4 * KIB, 0)  # virtual block 2: here again (room came back)
    s.add_remote(1, 5, 1)  # virtual block 3: MU 5's second block
    assert s.held(1, 0, 16 * KIB) == {LOCAL: (0, 8 * KIB), 5: (0, 8 * KIB)}
    assert s.held(1, 13 * KIB, 14 * KIB) == {5: (5 * KIB, 6 * KIB)}
    assert [(e.buffer, e.virtual) for e in s.extents()] == [(1, 0), (1, 2)]


def test_spill_under_a_policy_without_block_tables_is_refused_in_one_line():
    for policy in ("static-single", "static-multi", "realloc-copy"):
        with pytest.raises(ConfigError) as e:
            config({"memory": {"policy": policy, "spill": "nearest"}})
        assert [str(i) for i in e.value.issues] == [
            f"memory.spill: nearest needs memory.policy = virtual (not {policy})"]


# ---------------------------------------------------------------------- a workload that spills on purpose
PROBE = buffer_label(78, "probe")


@dataclass(frozen=True)
class SpillProbe(Workload):
    """One CU: optionally fills MUs, then grows a buffer at ``home`` to ``nbytes``; with ``read``,
    reads ``read`` bytes of a buffer filling ``home`` and then of the grown buffer, apart."""

    kind: str = "probe"
    home: int = 0  # MU unit id
    nbytes: int = 0
    fill: tuple = ()  # MUs filled (their whole capacity) before the growth
    read: int = 0

    SECTION: ClassVar[str] = "probe"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
    KEYS: ClassVar[Table] = Table({})

    @property
    def work_items(self):
        return 1

    def program(self, cfg):
        return _Probe(self, cfg)


class _Probe:
    def __init__(self, p, cfg):
        self.p, self.cfg = p, cfg
        self.cu = int(Floorplan(cfg).unit_at(0, 0))

    def start(self, cu):
        return self._run(cu) if cu.uid == self.cu else None

    def on_message(self, cu, msg):
        raise RuntimeError("the probe takes no messages")

    def _run(self, cu):
        p, cap, shard = self.p, self.cfg.spec.mu_bytes, cu.shard
        shard.counts["admitted"] += 1
        refs = []
        for mu in p.fill:
            ref = yield from allocate(cu, mu, cap, PROBE)
            cu.send(m.APPEND, mu, nbytes=cap, mu=mu, buf=ref.buf, alloc=ref.alloc)
            refs.append(ref)
        grown = yield from allocate(cu, p.home, 0, PROBE)
        cu.send(m.APPEND, p.home, nbytes=p.nbytes, mu=p.home, buf=grown.buf, alloc=grown.alloc)
        for i, ref in enumerate([refs[0], grown] if p.read else []):
            yield Sleep(5000)  # the network and the MUs idle
            t0 = shard.now
            tag = cu.request(m.READ_REQ, ref.mu, nbytes=p.read, mu=ref.mu, buf=ref.buf, alloc=ref.alloc)
            yield Replies([tag], "memory")
            shard.record("step", i, t0, shard.now, 0, "ok")
        yield Sleep(5000)
        for ref in refs + [grown]:
            free(cu, ref)
        shard.counts["finished"] += 1
        shard.record("request", 0, 0, shard.now, 1, "ok")


SMALL_MUS = {"chip": {"preset": "plasticine", "rows": 4, "cols": 8, "mu_bytes": "16KiB"},
             "memory": {"spill": "nearest", "block_bytes": "1KiB"},
             "workload": {"decode": {"max_batch": 1}}}  # replaced by the probe


def probe(**keys):
    """(config, summary, tables, shard results) of a probe run on the small-MU chip."""
    cfg = config(SMALL_MUS, trace=True)  # a traced run keeps every step record
    done = simulate_chip(dataclasses.replace(cfg, workload=SpillProbe(**keys)))
    return cfg, done.summary, done.tables, done.simulation.outcome.reports


def _by_hops(cfg, home: int) -> list[int]:
    """Every other MU, nearest first, by brute force: Manhattan distance on the mesh, then id."""
    lay, cols = unit_layout(cfg.spec), cfg.spec.cols
    r0, c0 = divmod(int(lay.tile[home]), cols)

    def hops(u):
        r, c = divmod(int(lay.tile[u]), cols)
        return abs(r - r0) + abs(c - c0)

    return sorted((int(u) for u in lay.mus if u != home), key=lambda u: (hops(u), u)), hops


def _spilled(tables) -> dict[int, int]:
    """MU -> peak bytes of the guest buffers it held."""
    b = tables["buffers"]
    return {mu: peak for mu, label, peak in zip(b["mu"], b["label"], b["peak_bytes"]) if label == "spilled"}


@pytest.mark.parametrize("full_nearest", [False, True])
def test_a_buffer_grown_past_its_mu_continues_in_the_nearest_mu_with_room(full_nearest):
    cfg = config(SMALL_MUS)
    home = int(unit_layout(cfg.spec).mus[5])
    order, _ = _by_hops(cfg, home)
    fill = (order[0],) if full_nearest else ()
    target = order[1] if full_nearest else order[0]
    _, s, tables, _ = probe(home=home, nbytes=19 * KIB, fill=fill)
    assert s["completed"] and s["spilled_blocks"] == 3 and s["spilled_bytes"] == 3 * KIB
    assert _spilled(tables) == {target: 3 * KIB}
    assert s["leaks"] == s["use_after_free"] == s["double_free"] == s["premature_free"] == 0


def test_an_overflow_larger_than_the_nearest_mus_room_goes_on_to_the_next():
    cfg = config(SMALL_MUS)
    home = int(unit_layout(cfg.spec).mus[5])
    order, _ = _by_hops(cfg, home)
    # 16 KiB here, 16 KiB at the nearest, 4 KiB at the next nearest
    _, s, tables, _ = probe(home=home, nbytes=36 * KIB)
    assert _spilled(tables) == {order[0]: 16 * KIB, order[1]: 4 * KIB}
    # figures count the blocks where they are: three MUs held data, 36 KiB in all at the peak
    series = tables["mu_series"]
    peak_by_mu = {}
    for mu, used in zip(series["mu"].tolist(), series["used_bytes"].tolist()):
        peak_by_mu[mu] = max(peak_by_mu.get(mu, 0), used)
    assert {mu: b for mu, b in peak_by_mu.items() if b} == {home: 16 * KIB, order[0]: 16 * KIB, order[1]: 4 * KIB}
    n_mu = len(unit_layout(cfg.spec).mus)
    assert s["peak_mu_utilization"] == pytest.approx(36 * KIB / (n_mu * 16 * KIB))


def _zero_load(cfg, hops: int, kind: int, data: int) -> int:
    (flits,) = cfg.sizing.packet_flits(kind, data)
    return cfg.noc.with_(packet_flits=flits).zero_load_latency(hops)


@pytest.mark.parametrize("ring", [0, 1])
def test_a_read_of_a_spilled_block_costs_the_round_trip_at_zero_load_and_the_translation(ring):
    cfg = config(SMALL_MUS)
    home = int(unit_layout(cfg.spec).mus[5])
    order, hops = _by_hops(cfg, home)
    # ring 1: every MU at the nearest distance (MUs sit on a checkerboard: 2 hops) is full too
    nearest = [u for u in order if hops(u) == hops(order[0])]
    fill = (home, *nearest) if ring else (home,)
    remote = order[len(nearest)] if ring else order[0]
    assert hops(remote) == (4 if ring else 2)
    _, s, tables, results = probe(home=home, nbytes=KIB, fill=fill, read=512)
    assert _spilled(tables) == {remote: KIB} and s["remote_reads"] == 1
    local, spilled = sorted((r for res in results for r in res.work_log if r.kind == "step"), key=lambda r: r.ident)
    h = hops(remote)
    expect = (cfg.spec.translation_latency + REMOTE_LOOKUP  # the home MU's lookup, its entry names MU ``remote``
              + _zero_load(cfg, h, m.READ_REQ, 0)  # the request to it
              + _zero_load(cfg, h, m.READ_RESP, 512)  # its data back
              + NI_LATENCY)  # the home MU's answer leaves once the data is in
    assert (spilled.end - spilled.start) - (local.end - local.start) == expect


# ---------------------------------------------------------------------- the oracle under every protocol
# experts' input buffers outgrow 8 KiB MUs; seed 3: plain refcount's own race (a -1 overtaking
# a +1, which the oracle rightly reports) does not strike, so any finding would be the spill's
MOE = {"chip": {"preset": "plasticine", "rows": 4, "cols": 8, "mu_bytes": "8KiB"},
       "memory": {"spill": "nearest", "block_bytes": "512B"}, "run": {"seed": 3},
       "workload": {"kind": "moe", "moe": {"steps": 2, "tokens": 128, "experts": 4, "top_k": 2, "skew": 1.5,
                                           "producers": 3, "hidden": 128, "expert_ffn": 128}}}


@pytest.mark.parametrize("reclaim", ["refcount", "refcount-gated", "partial-free"])
def test_the_oracle_finds_nothing_across_spills_under_every_reclamation_protocol(reclaim):
    raw = {**MOE, "memory": {**MOE["memory"], "reclaim": reclaim}}
    done = run(raw)
    s, tables = done.summary, done.tables
    assert s["spilled_blocks"] > 0 and s["remote_reads"] > 0
    assert s["completed"]
    assert s["use_after_free"] == s["double_free"] == s["premature_free"] == s["leaks"] == 0
    freed = tables["buffers"]["freed"]
    assert min(freed) >= 0  # every buffer, its guests on other MUs too, freed


# ---------------------------------------------------------------------- over-committed decode
# twelve sequences whose KV caches outgrow the chip; placement "near" puts a worker's buffers on
# the MUs beside it, so some MUs fill while others have room (as a long prompt's MUs do)
KV = {"chip": {"preset": "plasticine", "rows": 4, "cols": 8, "mu_bytes": "64KiB"},
      "memory": {"placement": "near", "block_bytes": "1KiB"},
      "workload": {"kind": "kv-decode", "decode": {
          "requests": 12, "max_batch": 12, "prompt_tokens": {"dist": "uniform", "min": 8, "max": 32},
          "output_tokens": {"dist": "uniform", "min": 16, "max": 256}}}}


def spilling(raw: dict, spill: str = "nearest", **run_keys) -> dict:
    return {**raw, "memory": {**raw["memory"], "spill": spill}, "run": run_keys}


def first_oom_utilization(cfg, results) -> float | None:
    """Chip-wide share of MU bytes holding data when the first request found its MU out of memory."""
    events = [e for r in results for e in r.trace if e[2].startswith("out of memory")]
    if not events:
        return None
    cycle = min(e[4] for e in events)
    log = np.concatenate([r.mem_log for r in results])
    return float(log[log[:, 0] <= cycle, 2].sum()) / (len(unit_layout(cfg.spec).mus) * cfg.spec.mu_bytes)


def test_with_spill_the_first_out_of_memory_event_comes_with_the_chip_nearly_full():
    figures = {}
    for spill in ("none", "nearest"):
        cfg = config(spilling(KV, spill, trace_limit=10**7), trace=True)
        done = simulate_chip(cfg)
        s, results = done.summary, done.simulation.outcome.reports
        figures[spill] = first_oom_utilization(cfg, results), s
    (without, _), (with_spill, s) = figures["none"], figures["nearest"]
    assert with_spill is not None and with_spill >= 0.90
    assert without is not None and without < 0.60  # an MU full, the chip not much more than half
    assert s["spilled_blocks"] > 0 and s["use_after_free"] == s["premature_free"] == 0


def test_identical_for_any_shard_count_with_spill():
    raw = spilling(KV)
    ref = run(raw).summary
    assert ref["spilled_blocks"] > 0
    s = run(raw, shards=2).summary
    assert s["result_hash"] == ref["result_hash"] and s["spilled_blocks"] == ref["spilled_blocks"]


@pytest.mark.ray
def test_ray_backend_matches_local_with_spill(ray_session):
    raw = spilling(KV)
    ref = run(raw).summary
    s = run(raw, shards=2, backend="ray").summary
    assert s["result_hash"] == ref["result_hash"]

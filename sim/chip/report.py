"""What a chip shard hands back after a run, and the run's figures from all shards.

``shard_result`` turns a finished ChipShard into plain arrays and dicts (cheap to send
from a Ray actor); ``summarize_chip`` merges every shard's result into the run summary
and the per-MU, per-buffer and per-link tables. Everything here is a pure function of
the shard results, merged in a canonical order, so the figures (and the result hash)
are the same for any shard count and backend.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.chip import diagnosis, occupancy
from sim.chip import messages as m
from sim.chip.digest import Digest, combined
from sim.chip.priced_memory import with_priced
from sim.chip.records import BUFFER_LABELS, BufferLife, LandingLife, MuStats, Oversize, WorkRecord
from sim.chip.rows import Rows
from sim.chip.spec import unit_layout
from sim.chip.spill import spills
from sim.energy.counts import ActionCounts, energy, summary_figures, table_columns
from sim.energy.table import default_table
from sim.memory import oracle
from sim.network import LinkCounts
from sim.noc.topology import DIRECTION


@dataclass
class ShardResult:
    end_cycle: int
    sent_count: np.ndarray
    sent_packets: np.ndarray
    sent_flits: np.ndarray
    oracle_log: np.ndarray
    occupancy: occupancy.OccupancyReport  # its MUs' bytes over the run
    life: np.ndarray  # [n, 15] every buffer's life (BufferLife.coded; freed -1: never freed)
    life_names: dict  # the codes of ``freed_by`` in ``life``
    records: list[WorkRecord]  # requests
    work: Digest  # every other work record, folded (kind, ident, start, end, tokens, status)
    work_counts: dict  # work records other than requests, by kind
    links: LinkCounts  # flits over each link the shard owns, as the NoC model counted them
    delivered: Digest  # every message delivery (id, destination unit, cycle, kind), folded
    waits: dict
    compute_cycles: int
    mu_stats: MuStats
    stalled_at_end: int
    counts: dict
    trace: list = field(default_factory=list)
    trace_dropped: int = 0
    logged: list = field(default_factory=list)  # workload-specific records
    memory_map: dict | None = None
    units: list = field(default_factory=list)  # unit ids simulated by the shard
    lane_cycles: int = 0  # CU compute cycles x lanes used (energy)
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    waiting: diagnosis.Waits = field(default_factory=diagnosis.Waits)  # who still waits at the end
    first_oom: int = -1  # cycle of the shard's first out-of-memory event (-1: none)
    tiers: dict = field(default_factory=dict)  # tier name -> its controller's figures (chips with tiers)
    flow_byte_hops: int = 0  # bytes x NoC hops of the flows to and from memories (energy)
    flow_grid_bytes: int = 0  # bytes of those flows
    deliveries: np.ndarray | None = None  # [n, 4] every delivery, as ``delivered`` (runs writing a trace)
    work_log: list[WorkRecord] | None = None  # every work record but requests, as ``work`` (runs writing a trace)

    @property
    def mem_log(self) -> np.ndarray:
        """[n, 4] every change of its MUs' bytes: cycle, mu, d_used, d_reserved (runs writing a trace)."""
        return self.occupancy.log


def _arr(rows, width) -> np.ndarray:
    return np.array(rows, dtype=np.int64).reshape(-1, width)


def shard_result(shard) -> ShardResult:
    mus, cus = shard.mus(), shard.cus()
    waits: dict[str, int] = {}
    for cu in cus:
        for k, v in cu.wait_cycles.items():
            waits[k] = waits.get(k, 0) + v
    stats = MuStats()
    for mu in mus:
        stats = stats.add(mu.stats)
    now = shard.now
    names = dict(shard.life_names)
    live = Rows(shard.lives.width)
    for mu in mus:
        for rec in mu.table.values():
            live.append(rec.life(mu.uid, -1, "").coded(names))  # freed = -1
    life = np.concatenate([shard.lives.array(), live.array()])
    mm = shard.memory_map
    if mm is None and shard.cfg.memory_map_cycle >= 0:
        mm = shard._snapshot(now)
        mm["ended_before"] = True
    return ShardResult(
        end_cycle=now, sent_count=shard.sent_count, sent_packets=shard.sent_packets, sent_flits=shard.sent_flits,
        oracle_log=shard.oracle_log.array(), occupancy=shard.occupancy.finish(), life=life, life_names=names,
        records=list(shard.records), work=shard.work.sealed(), work_counts=dict(shard.work_counts),
        links=shard.net.link_totals(), delivered=shard.deliveries.sealed(),
        deliveries=_arr(shard.delivery_log, 4) if shard.delivery_log is not None else None,
        work_log=shard.work_log,
        waits=waits, compute_cycles=sum(cu.compute_cycles for cu in cus), mu_stats=stats,
        stalled_at_end=sum(len(mu.stalled) for mu in mus), counts=dict(shard.counts),
        trace=shard.trace_events, trace_dropped=shard.trace_dropped, memory_map=mm, units=sorted(shard.units),
        logged=list(shard.logged), lane_cycles=sum(cu.lane_cycles for cu in cus),
        dram_read_bytes=sum(d.bytes_read for d in shard.drams()),
        dram_write_bytes=sum(d.bytes_written for d in shard.drams()),
        flow_byte_hops=sum(t.byte_hops for t in shard.flow_units()),
        flow_grid_bytes=sum(t.grid_bytes for t in shard.flow_units()),
        waiting=diagnosis.waits_of(shard),
        first_oom=min((mu.first_oom for mu in mus if mu.first_oom >= 0), default=-1),
        tiers={t.tier.name: tier_figures(t) for t in shard.flow_units() if t.tier is not None},
    )


def tier_figures(t) -> dict:
    """A tier controller's counters (sim/chip/tier_controller.py): bytes read and written, bytes it copied
    to each other tier (by that tier's name), its pages' peak, flows, refusals."""
    names = [x.name for x in t.cfg.spec.tiers]
    return {"read_bytes": t.bytes_read, "write_bytes": t.bytes_written, "peak_bytes": t.memory.peak_bytes,
            "copied_to": {names[k]: v for k, v in sorted(t.copied_to.items())}, "flows": t.flow_count,
            "full_events": t.full_events, "end_bytes": t.memory.used_bytes, "refused_bytes": t.refused_bytes,
            "capacity": t.tier.capacity}


def tier_summary(results: list[ShardResult]) -> dict:
    """Per tier: bytes read and written (a copy between tiers is read from one and written to the
    other), peak bytes of pages taken, flows; and the tiers' refusals: empty without tiers (the
    figures of other runs, and their hashes, stay as recorded)."""
    tiers: dict[str, dict] = {}
    for r in results:
        tiers.update(r.tiers)
    if not tiers:
        return {}
    out: dict = {}
    for name, t in sorted(tiers.items()):
        written = t["write_bytes"] + sum(o["copied_to"].get(name, 0) for o in tiers.values())
        out.update({f"{name}_read_bytes": t["read_bytes"], f"{name}_write_bytes": written,
                    f"{name}_peak_bytes": t["peak_bytes"], f"{name}_flows": t["flows"]})
    out["tier_full_events"] = sum(t["full_events"] for t in tiers.values())
    return out


def tier_refusals(results: list[ShardResult]) -> str:
    """The status detail of evictions a full tier refused ("" if none): the bytes had nowhere to
    go, so a run that otherwise ended is failed (after the hash: its figures are unchanged)."""
    out = []
    for r in results:
        for name, t in sorted(r.tiers.items()):
            if t.get("refused_bytes"):
                out.append(f"{name.upper()} full: {t['refused_bytes']:,} evicted bytes had no page there "
                           f"(raise chip.{name}.capacity, now {t['capacity']:,.0f} B)")
    return "; ".join(out)


def _percentile(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def link_loads(cfg, counts: list[LinkCounts]) -> dict:
    """Flits over every directed router-to-router link, as the NoC model counted them while
    they crossed (whatever the routing); each shard counts the links it owns."""
    p = cfg.noc
    grid = p.grid
    load = np.zeros((grid.n, 5), dtype=np.int64)
    for c in counts:
        load[c.router, c.port] += c.flits
    src, port, dst = grid.links()
    return {"src_router": src, "dst_router": dst, "src_row": src // p.cols, "src_col": src % p.cols,
            "direction": [DIRECTION[i] for i in port.tolist()], "flits": load[src, port]}


def summarize_chip(cfg, results: list[ShardResult], cut_off: bool = False) -> tuple[dict, dict]:
    """(summary row, {table name: columns}) of a run from every shard's result. ``cut_off``: the
    run stopped at ``cfg.max_cycles`` with events left, so it simulated that many cycles (every
    event before it, none after), not only up to its last event."""
    spec = cfg.spec
    lay = unit_layout(spec)
    n_mu = len(lay.mus)
    cap = n_mu * spec.mu_bytes
    end = cfg.max_cycles if cut_off else max(r.end_cycle for r in results) + 1
    sent = np.sum([r.sent_count for r in results], axis=0)
    flits = np.sum([r.sent_flits for r in results], axis=0)
    packets = np.sum([r.sent_packets for r in results], axis=0)
    stats, waits = _merged_counts(results)
    first_oom = min((r.first_oom for r in results if r.first_oom >= 0), default=-1)
    occ = occupancy.figures([r.occupancy for r in results], end, first_oom)
    req = sorted((rec for r in results for rec in r.records), key=WorkRecord.row)
    done = [x for x in req if x.status == "ok"]
    lat = np.array([x.end - x.start for x in done], dtype=np.float64)
    tokens = int(sum(x.tokens for x in req))
    seconds = end / spec.clock_hz
    admitted = sum(r.counts.get("admitted", 0) for r in results)
    finished = sum(r.counts.get("finished", 0) for r in results)
    expected = cfg.workload.work_items
    completed = bool(finished == expected and admitted == expected)
    verdict = oracle.check_log(oracle.merge_logs([r.oracle_log for r in results]), completed)
    sync_msgs = int(sent[m.REF_INC] + sent[m.WEIGHT_REQ] + stats.sync_acks)
    summary = {
        "workload": cfg.workload.kind, "chip": spec.name, "rows": spec.rows, "cols": spec.cols,
        "network": cfg.network, "policy": cfg.policy.name, "reclaim": cfg.reclaim.name,
        "on_oom": cfg.on_oom, "placement": cfg.placement,
        "weight_bits": cfg.reclaim.ref_weight_bits, "block_bytes": cfg.policy.block_bytes,
        "sim_cycles": int(end), "sim_seconds": seconds,
        "requests": len(req), "requests_failed": len(req) - len(done), "tokens": tokens,
        "tokens_per_second": tokens / seconds if seconds > 0 else 0.0,
        "latency_p50_cycles": _percentile(lat, 50), "latency_p99_cycles": _percentile(lat, 99),
        "latency_mean_cycles": float(lat.mean()) if len(lat) else float("nan"),
        **_memory_figures(occ, cap, end, stats),
        "messages_total": int(sent.sum()), "flits_total": int(flits.sum()), "packets_total": int(packets.sum()),
        "messages": {k: int(v) for k, v in zip(m.KINDS, sent.tolist())},
        "sync_messages": sync_msgs, "sync_wait_cycles": int(waits.get("sync", 0)),
        "weight_topups": stats.weight_topups,
        "memory_wait_cycles": int(waits.get("memory", 0)), "control_wait_cycles": int(waits.get("control", 0)),
        "compute_cycles": int(sum(r.compute_cycles for r in results)),
        "oom_events": stats.oom_events, "stalls": stats.stalls, "stall_cycles": stats.stall_cycles,
        "evictions": stats.evictions, "bytes_evicted": stats.bytes_evicted, "oom_failures": stats.failures,
        "stalled_at_end": int(sum(r.stalled_at_end for r in results)),
        "use_after_free": verdict.use_after_free, "double_free": verdict.double_free,
        "premature_free": verdict.premature_free, "leaks": verdict.leaks,
        "completed": completed, "work_items": int(expected), "work_finished": int(finished),
    }
    tables = {"buffers": _life_columns(results), "mu_series": _mu_series(cfg, lay, results, end),
              "links": _links(cfg, results, end)}
    logged = [x for r in results for x in r.logged]
    extra, extra_tables = cfg.workload.figures(list(logged), spec.clock_hz)
    summary.update(extra)  # the workload's own figures and tables
    tables.update(extra_tables)
    summary.update(_where_figures(cfg, results, stats))
    unhashed = cfg.workload.UNHASHED
    summary["result_hash"] = chip_result_hash(results, {k: v for k, v in summary.items() if k not in unhashed})
    # (before the status: hashes stay as recorded)
    summary["status"], summary["status_detail"] = _status(cfg, results, summary, finished, admitted)
    summary["oracle_first"] = verdict.first
    # after the hash: views of what it covers (the MUs' memory log, the scheduler's replies)
    summary.update(first_oom_utilization=float(occ.oom_used) / cap if occ.oom_used >= 0 else None,
                   preempt_mode=cfg.preempt_mode if cfg.on_oom == "preempt" else None,
                   admit_watermark=cfg.admit_watermark)
    served, served_tables = cfg.workload.serving_figures(list(logged), spec.clock_hz, seconds)
    summary.update(served)
    summary.update(with_priced(summary, cfg.workload.priced_memory(list(logged))))  # a serve run's steps' memory
    tables.update(served_tables)
    summary["live_at_end"] = verdict.live_at_end  # after the hash, which covers the oracle log it counts
    summary["token_unit"] = cfg.workload.token_unit  # what tokens count (after the hash: it names, not counts)
    # energy: after the hash (it is a price list applied to what was simulated, not part of it)
    e = _energy(cfg, results, sent, int(np.sum(tables["links"]["flits"])))
    steps = sum(r.work_counts.get("step", 0) for r in results)
    summary.update(summary_figures(e, tokens, steps or len(req)))
    tables["energy"] = table_columns(e)
    summary.update(cfg.workload.input_figures(cfg))  # what the workload measured of its inputs (traces)
    return summary, tables



def _memory_figures(occ, cap: int, end: int, stats: MuStats) -> dict:
    """The MUs' utilisation (of their bytes, at the peak and over the run), fragmentation and copies."""
    used_int, res_int = float(occ.used_integral), float(occ.reserved_integral)
    return {"peak_mu_utilization": float(occ.peak_used) / cap, "mean_mu_utilization": used_int / (cap * end),
            "peak_mu_reserved": float(occ.peak_reserved) / cap,
            "fragmentation": 1.0 - used_int / res_int if res_int > 0 else 0.0,
            "bytes_copied": stats.bytes_copied, "copy_cycles": stats.copy_cycles}


def _merged_counts(results: list[ShardResult]) -> tuple[MuStats, dict[str, int]]:
    """The shards' MU counters and wait cycles (by what was waited for), summed."""
    stats = MuStats()
    for r in results:
        stats = stats.add(r.mu_stats)
    waits: dict[str, int] = {}
    for r in results:
        for k, v in r.waits.items():
            waits[k] = waits.get(k, 0) + v
    return stats, waits


def _where_figures(cfg, results: list[ShardResult], stats: MuStats) -> dict:
    """Figures only some chips have: landing buffers (a system's chip), memory tiers, spilling."""
    out: dict = {}
    landed = [x for r in results for x in r.logged if isinstance(x, LandingLife)]
    if landed:  # tokens other chips of a system wrote into this chip's landing buffers (sim/chip/exchange.py)
        from sim.chip.exchange import landing_figures

        out.update(landing_figures(landed))
    out.update(tier_summary(results))  # chips with memory tiers only
    if spills(cfg):  # memory.spill: its figures only then (other runs' hashes stay as recorded)
        out.update(spill=cfg.policy.spill, spilled_blocks=stats.spilled_blocks,
                   spilled_bytes=stats.spilled_bytes, remote_reads=stats.remote_reads)
    return out


def _status(cfg, results: list[ShardResult], summary: dict, finished: int, admitted: int) -> tuple[str, str]:
    """The run's status and its detail in words (after the hash: they name what it covers)."""
    expected = cfg.workload.work_items
    waiting = diagnosis.merge([r.waiting for r in results])
    status = diagnosis.status_of(summary["completed"], summary["requests_failed"], cut_off=False)
    detail = diagnosis.detail(status, waiting, cfg.workload.WORK_UNIT, finished, admitted, expected,
                              summary["requests_failed"], _oversize(cfg, results), cfg.on_oom)
    if summary.get("step_error") and status == "failed":  # a serve step could not be priced: its
        # requests were ended for that, not refused by an MU (sim/workloads/serve/batcher.py)
        detail = (f"{summary['requests_failed']} of {expected} {cfg.workload.WORK_UNIT} not served: "
                  f"a step could not be priced: {summary['step_error']}")
    refused = tier_refusals(results)
    if refused:  # evicted data a full tier had no pages for: the run cannot be said to have completed
        return "failed", refused
    return status, detail


def _energy(cfg, results: list[ShardResult], sent: np.ndarray, link_flits: int):
    """The run's energy: its actions (and what the workload priced instead of simulating, a serve
    run's steps) at the price list's energies."""
    acts = chip_actions(cfg, results, sent, link_flits)
    priced = cfg.workload.priced_actions([x for r in results for x in r.logged])
    if priced is not None:
        acts = acts.add(priced)
    return energy(acts, cfg.energy or default_table())


def chip_actions(cfg, results: list[ShardResult], sent: np.ndarray, link_flits: int) -> ActionCounts:
    """Every shard's counters as priced actions. A flit passes one router more than the
    links it crosses (its source router), so router passes = link crossings + flits sent."""
    stats = MuStats()
    for r in results:
        stats = stats.add(r.mu_stats)
    flits_sent = int(np.sum([r.sent_flits for r in results]))
    data_kinds = (m.READ_RESP, m.WRITE, m.APPEND)
    bits = cfg.spec.flit_bits
    tiers = tier_summary(results)
    # a flow's bytes cross the links between the tier's edge and the far unit (and one router more)
    hops = 8 * sum(r.flow_byte_hops for r in results)
    moved = 8 * sum(r.flow_grid_bytes for r in results)
    return ActionCounts(
        cu_fu_ops=sum(r.lane_cycles for r in results) * cfg.spec.cu_stages,
        mu_read_bytes=stats.read_bytes, mu_write_bytes=stats.write_bytes, mu_translations=stats.translations,
        copy_bytes=stats.bytes_copied, router_flit_bits=(link_flits + flits_sent) * bits + hops + moved,
        link_flit_bits=link_flits * bits + hops, dram_read_bytes=sum(r.dram_read_bytes for r in results),
        dram_write_bytes=sum(r.dram_write_bytes for r in results),
        hbm_read_bytes=tiers.get("hbm_read_bytes", 0), hbm_write_bytes=tiers.get("hbm_write_bytes", 0),
        ddr_read_bytes=tiers.get("ddr_read_bytes", 0), ddr_write_bytes=tiers.get("ddr_write_bytes", 0),
        protocol_messages=int(sent.sum() - sum(int(sent[k]) for k in data_kinds)))


def _lives(results) -> np.ndarray:
    """Every shard's buffer lives, sorted by allocation id (unique); an object array of Python ints
    if a weight is beyond int64."""
    a = np.concatenate([r.life for r in results]) if results else np.zeros((0, 15), dtype=np.int64)
    if a.dtype == object:
        a = np.array([[int(x) for x in row] for row in a.tolist()], dtype=object).reshape(-1, 15)
    return a[np.argsort(a[:, 0], kind="stable")] if len(a) else a


def _life_bytes(lives: np.ndarray) -> bytes:
    return repr(lives.tolist()).encode() if lives.dtype == object else lives.astype("<i8").tobytes()


def _life_columns(results) -> dict:
    rows = _lives(results)
    names: dict[int, str] = {}
    for r in results:
        names.update(r.life_names)
    cols: dict[str, Any] = {f.name: rows[:, i] for i, f in enumerate(dataclasses.fields(BufferLife))}
    cols["label"] = [BUFFER_LABELS.get(x, str(x)) for x in cols["label"].tolist()]
    cols["freed_by"] = [names[x] for x in cols["freed_by"].tolist()]
    cols["evicted"] = cols["evicted"].astype(bool)
    return cols


def _mu_series(cfg, lay, results, end: int) -> dict:
    """Every MU's used and reserved bytes at each sample (sim/chip/occupancy.py), MU by MU."""
    cycles, mus, data = occupancy.mu_samples([r.occupancy for r in results], end)
    col = {uid: i for i, uid in enumerate(mus)}
    order = [col[uid] for uid in lay.mus.tolist()]
    n, k = len(cycles), len(order)
    tiles = lay.tile[lay.mus]
    out = {"cycle": np.tile(cycles, k), "mu": np.repeat(lay.mus, n), "row": np.repeat(tiles // cfg.spec.cols, n),
           "col": np.repeat(tiles % cfg.spec.cols, n),
           "used_bytes": data[:, 0, order].T.reshape(-1), "reserved_bytes": data[:, 1, order].T.reshape(-1)}
    out["utilization"] = out["used_bytes"] / cfg.spec.mu_bytes
    return out


def _links(cfg, results, end: int) -> dict:
    cols = link_loads(cfg, [r.links for r in results])
    cols["utilization"] = cols["flits"] / max(end, 1)
    return cols


def _oversize(cfg, results) -> str:
    """The first buffer refused for being larger than any MU (and how many more were)."""
    over = sorted((x for r in results for x in r.logged if isinstance(x, Oversize)), key=Oversize.row)
    if not over:
        return ""
    more = f" (and {len(over) - 1} more)" if len(over) > 1 else ""
    return over[0].describe(cfg.policy.name) + more


def chip_result_hash(results, summary: dict) -> str:
    """sha256 over every message delivery (id, destination, cycle, kind: their multiset digest,
    sim/chip/digest.py), the oracle log, the buffer life table, the request records, the other
    work records (their digest), the workload's hashed records and the summary's integer figures."""
    h = hashlib.sha256()
    h.update(combined([r.delivered for r in results]))
    h.update(oracle.merge_logs([r.oracle_log for r in results]).astype("<i8").tobytes())
    h.update(_life_bytes(_lives(results)))
    h.update(repr(sorted(rec.row() for r in results for rec in r.records)).encode())
    h.update(combined([r.work for r in results]))
    logged = sorted((type(x).__name__, x.row()) for r in results for x in r.logged if getattr(x, "HASHED", True))
    if logged:  # workload-specific records (none for most workloads: their hash stays as it was)
        h.update(repr(logged).encode())
    ints = {k: v for k, v in summary.items() if isinstance(v, (int, str, dict)) and not isinstance(v, bool)}
    h.update(repr(sorted(ints.items())).encode())
    return h.hexdigest()[:32]

"""Turn shard reports into the run's figures: latency, throughput, hops, Little's law, hash.

Definitions (BookSim2's): a packet's latency runs from its creation (it may wait in
the source queue) to its tail flit reaching the destination terminal; packets created
in the measurement window [warm-up, warm-up + measure) are measured; offered and
accepted loads are flits created and ejected per node per cycle in that window.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from sim.noc.params import NocParams
from sim.noc.ports import DIRECTION
from sim.noc.shard import NocReport

SATURATION_SHORTFALL = 0.03  # accepted this far below offered means the load is not sustained


@dataclass
class PacketRecords:
    """Measured packets, sorted by id: id, source, destination, creation, injection, ejection."""

    pkt: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    create: np.ndarray
    inject: np.ndarray
    eject: np.ndarray

    @property
    def latency(self) -> np.ndarray:
        return self.eject - self.create


def packet_records(p: NocParams, reports: list[NocReport]) -> PacketRecords:
    """Join the source side (injection) and sink side (ejection) of every measured packet."""
    ip = np.concatenate([r.inject_pkt for r in reports])
    idst = np.concatenate([r.inject_dst for r in reports])
    icyc = np.concatenate([r.inject_cycle for r in reports])
    ep = np.concatenate([r.eject_pkt for r in reports])
    ecyc = np.concatenate([r.eject_cycle for r in reports])
    io, eo = np.argsort(ip, kind="stable"), np.argsort(ep, kind="stable")
    ip, idst, icyc, ep, ecyc = ip[io], idst[io], icyc[io], ep[eo], ecyc[eo]
    pos = np.searchsorted(ip, ep)
    if len(ep) and (pos.max() >= len(ip) or not np.array_equal(ip[pos], ep)):
        raise RuntimeError("a packet was ejected that was never injected")
    return PacketRecords(ep, ep % p.nodes, idst[pos], ep // p.nodes, icyc[pos], ecyc)


def noc_result_hash(rec: PacketRecords) -> str:
    """sha256 over (id, source, destination, inject cycle, eject cycle) of every measured packet."""
    table = np.stack([rec.pkt, rec.src, rec.dst, rec.inject, rec.eject], axis=1).astype("<i8")
    return hashlib.sha256(table.tobytes()).hexdigest()[:32]


def _sum_arrays(arrays: list[np.ndarray]) -> np.ndarray:
    n = max(len(a) for a in arrays)
    out = np.zeros(n, dtype=np.int64)
    for a in arrays:
        out[: len(a)] += a
    return out


def check_conservation(reports: list[NocReport], in_transit: int = 0) -> None:
    """Every flit ever created is ejected, buffered, queued at a source or on a link."""
    created = sum(int(r.created_flits.sum()) for r in reports)
    accounted = sum(int(r.ejected_flits.sum()) + r.flits_buffered + r.flits_queued + r.flits_in_flight
                    for r in reports) + in_transit
    if created != accounted:
        raise RuntimeError(f"flit conservation violated: {created} created, {accounted} accounted for")


def summarize_noc(p: NocParams, reports: list[NocReport], saturated: bool, in_transit: int = 0) -> dict:
    """The noc_summary row's measured columns (see cluster/results/schemas.py); checks conservation."""
    check_conservation(reports, in_transit)
    w0, m = p.warmup_cycles, p.measure_cycles
    w1 = w0 + m
    n = p.nodes
    rec = packet_records(p, reports)
    created = _sum_arrays([r.created_flits for r in reports])
    ejected = _sum_arrays([r.ejected_flits for r in reports])
    measured = int(sum(r.inject_pkt.size for r in reports))
    expected = int(created[w0:w1].sum()) // p.packet_flits
    lat = rec.latency.astype(np.float64)
    done = len(lat) > 0
    # Little's law over the window: L = time-average flits in the system (source queues
    # + network), lambda = flits created per cycle, W = mean flit latency
    in_system = np.cumsum(created - ejected)[w0:w1]
    big_l = float(in_system.mean())
    lam = float(created[w0:w1].sum()) / m
    flit_count = sum(r.flit_latency_count for r in reports)
    big_w = sum(r.flit_latency_sum for r in reports) / flit_count if flit_count else float("nan")
    little = abs(big_l - lam * big_w) / big_l if big_l > 0 else 0.0
    sim_cycles = int(rec.eject.max()) + 1 if (done and not saturated) else w1 + p.drain_cycles
    offered = float(created[w0:w1].sum()) / (n * m)
    accepted = float(ejected[w0:w1].sum()) / (n * m)
    # Beyond saturation source queues grow without bound: the network accepts less than
    # is offered (beyond the window's noise), some source falls behind (a permutation can
    # saturate a few flows while the average barely moves), or measured packets never drain.
    by_src_in = np.sum([r.window_created_by_src for r in reports], axis=0)
    by_src_out = np.sum([r.window_ejected_by_src for r in reports], axis=0)
    src_backlog = by_src_in - by_src_out
    allowed = np.maximum(max(32, 8 * p.packet_flits), SATURATION_SHORTFALL * by_src_in)
    backlog = accepted < (1.0 - SATURATION_SHORTFALL) * offered or bool((src_backlog > allowed).any())
    return {
        "offered": offered,
        "accepted": accepted,
        "avg_latency": float(lat.mean()) if done else float("nan"),
        "p50_latency": float(np.percentile(lat, 50)) if done else float("nan"),
        "p99_latency": float(np.percentile(lat, 99)) if done else float("nan"),
        "max_latency": float(lat.max()) if done else float("nan"),
        "avg_network_latency": float((rec.eject - rec.inject).mean()) if done else float("nan"),
        "avg_hops": float(sum(r.measured_hops for r in reports) / len(lat)) if done else float("nan"),
        "measured_packets": expected,
        "saturated": bool(saturated or backlog or len(lat) < expected or measured < expected),
        "sim_cycles": sim_cycles,
        "flits_in_network": big_l,
        "max_source_backlog": int(src_backlog.max()),
        "littles_law_error": float(little),
        "result_hash": noc_result_hash(rec),
    }


def link_columns(p: NocParams, reports: list[NocReport]) -> dict:
    """Columns of the noc_links table: one row per directed router-to-router link."""
    grid = p.grid
    router = np.concatenate([r.link_router for r in reports])
    port = np.concatenate([r.link_port for r in reports])
    flits = np.concatenate([r.link_flits for r in reports])
    order = np.lexsort((port, router))
    router, port, flits = router[order], port[order], flits[order]
    return {
        "src_router": router,
        "dst_router": grid.neighbor(router, port),
        "src_row": router // p.cols,
        "src_col": router % p.cols,
        "direction": [DIRECTION[i] for i in port.tolist()],
        "flits": flits,
        "utilization": flits / p.measure_cycles,
    }

"""Config schema of ``rdasim noc`` (sections [noc] and [run]) and its translation to NocParams.

Defaults are the reference "config B" of BookSim2 (docs/references.md, "NoC"):
an 8x8 mesh, 4 VCs x 4 flit buffers, routing/VC/switch/traversal delays 0/1/1/1,
link and credit delay 1, 1-flit packets, uniform traffic; with no rate given the run
is the reference latency/throughput curve.
"""

from __future__ import annotations

from cluster.config import Field, Table, footprint
from cluster.config.loader import ConfigError
from cluster.config.schema import Issue
from cluster.errors import UserError
from sim.noc.params import TOPOLOGIES, NocParams
from sim.noc.routing import ROUTINGS
from sim.noc.traffic import TRAFFIC_PATTERNS

REFERENCE_RATES = [0.005, 0.05, 0.1, 0.2, 0.3, 0.35, 0.4, 0.42]
# BookSim2's published 8x8 config-B curve (docs/references.md, "NoC"): rate -> latency
BOOKSIM_8X8_LATENCY = {0.005: 26.92, 0.05: 27.03, 0.1: 27.21, 0.2: 27.85, 0.3: 29.34,
                       0.35: 31.29, 0.4: 40.54, 0.42: 206.4}


def booksim_reference(p: NocParams) -> float | None:
    """BookSim2's latency for this load if ``p`` is its reference configuration, else None."""
    config_b = NocParams(rows=8, cols=8, rate=p.rate, seed=p.seed, warmup_cycles=p.warmup_cycles,
                         measure_cycles=p.measure_cycles, drain_cycles=p.drain_cycles)
    return BOOKSIM_8X8_LATENCY.get(round(p.rate, 6)) if p == config_b else None


def _run_checks(run: dict) -> list[tuple[str, str]]:
    if run.get("backend") == "local" and run.get("address"):
        return [("address", "an address only makes sense with backend = \"ray\"")]
    return []


# [run] is shared by every simulation command (rdasim noc, rdasim run)
RUN_SECTION = Table(
    {
        "seed": Field("int", 1, "global random seed; every stream derives from (seed, component)", min=0),
        "shards": Field("int_or_auto", 1, "number of rectangular shards the grid is cut into; \"auto\": the count "
                        "the run's opening in one process predicts fastest (1 included)", min=1),
        "cut": Field("choice", "rows", "shard shape: row bands, column bands or blocks",
                     choices=("rows", "cols", "blocks")),
        "epoch": Field("int", None, "least cycles per lockstep epoch (default: the lookahead); an epoch runs on "
                       "while nothing any shard holds can reach another", min=1, unit="cycles"),
        "backend": Field("choice", "local", "local (in-process) or ray (one actor per shard)",
                         choices=("local", "ray")),
        "address": Field("str", None, "Ray cluster address (auto, ray://host:10001); default: embedded local Ray"),
    },
    doc="how to run",
    checks=[_run_checks],
)


def _noc_checks(noc: dict) -> list[tuple[str, str]]:
    out = []
    if noc.get("k") is not None and (noc.get("rows") is not None or noc.get("cols") is not None):
        out.append(("k", "give either k (a k x k grid) or rows and cols, not both"))
    if noc.get("rate") is not None and noc.get("rates"):
        out.append(("rates", "give either rate (one run) or rates (a curve), not both"))
    if noc.get("rates") is not None and not noc["rates"]:
        out.append(("rates", "is empty: give at least one offered load, or leave rates out for the reference curve"))
    pf = noc.get("packet_flits") or 1
    for i, r in enumerate([noc.get("rate")] if noc.get("rate") is not None else (noc.get("rates") or [])):
        key = "rate" if noc.get("rate") is not None else f"rates[{i}]"
        if r == 0:
            out.append((key, "0 offers no traffic, so there is no latency or throughput to measure; give a load > 0"))
        elif not 0 < r <= pf:
            out.append((key, f"{r} is outside (0, packet_flits = {pf}] flits/node/cycle"))
    return out


NOC_SECTION = Table(
    {
        "k": Field("int", None, "k x k grid (shorthand for rows = cols = k)", min=1),
        "rows": Field("int", None, "router rows (default 8)", min=1),
        "cols": Field("int", None, "router columns (default 8)", min=1),
        "topology": Field("choice", "mesh", "mesh or torus", choices=TOPOLOGIES),
        "traffic": Field("choice", "uniform", "synthetic traffic pattern (sim/noc/traffic.py)",
                         choices=TRAFFIC_PATTERNS),
        "routing": Field("choice", "xy", "routing function (sim/noc/routing.py)", choices=ROUTINGS),
        "rate": Field("float", None, "offered load, flits/node/cycle (one run)", min=0.0, unit="flits/node/cycle"),
        "rates": Field("list", None, "offered loads of a latency/throughput curve (default: the reference curve)",
                       item=Field("float", min=0.0)),
        "packet_flits": Field("int", 1, "flits per packet", min=1),
        "vcs": Field("int", 4, "virtual channels per port", min=1, max=16),
        "vc_buffers": Field("int", 4, "flit buffers per virtual channel", min=1),
        "routing_delay": Field("int", 0, "route computation delay (0: lookahead routing)", min=0, unit="cycles"),
        "vc_alloc_delay": Field("int", 1, "VC allocation delay", min=1, unit="cycles"),
        "sw_alloc_delay": Field("int", 1, "switch allocation delay", min=1, unit="cycles"),
        "st_delay": Field("int", 1, "switch traversal delay", min=1, unit="cycles"),
        "link_latency": Field("int", 1, "link latency", min=1, unit="cycles"),
        "credit_delay": Field("int", 1, "credit processing delay", min=0, unit="cycles"),
        "hotspot_nodes": Field("list", None, "hotspot routers for traffic = hotspot (default: the centre)",
                               item=Field("int", min=0)),
        "hotspot_fraction": Field("float", 0.1, "share of packets sent to a hotspot", min=0.0, max=1.0),
        "warmup_cycles": Field("int", 3000, "cycles before measurement starts", min=0, unit="cycles"),
        "measure_cycles": Field("int", 3000, "measurement window; its packets are measured", min=1, unit="cycles"),
        "drain_cycles": Field("int", 5000, "cycles allowed after the window for measured packets to arrive; "
                              "beyond that the load is reported saturated", min=0, unit="cycles"),
    },
    doc="the network and its synthetic traffic",
    checks=[_noc_checks],
)

NOC_SCHEMA = Table({"noc": NOC_SECTION, "run": RUN_SECTION})


def rates_of(cfg: dict) -> list[float]:
    noc = cfg["noc"]
    if noc["rate"] is not None:
        return [noc["rate"]]
    return list(noc["rates"] or REFERENCE_RATES)


def params_of(cfg: dict, rate: float) -> NocParams:
    """NocParams for one offered load of a resolved noc config."""
    noc, run = cfg["noc"], cfg["run"]
    rows = noc["k"] or noc["rows"] or 8
    cols = noc["k"] or noc["cols"] or 8
    try:
        return NocParams(
            rows=rows, cols=cols, topology=noc["topology"], vcs=noc["vcs"], vc_buffers=noc["vc_buffers"],
            routing_delay=noc["routing_delay"], vc_alloc_delay=noc["vc_alloc_delay"],
            sw_alloc_delay=noc["sw_alloc_delay"], st_delay=noc["st_delay"],
            link_latency=noc["link_latency"], credit_delay=noc["credit_delay"],
            packet_flits=noc["packet_flits"], traffic=noc["traffic"], routing=noc["routing"], rate=rate,
            hotspot_nodes=tuple(noc["hotspot_nodes"] or ()), hotspot_fraction=noc["hotspot_fraction"],
            warmup_cycles=noc["warmup_cycles"], measure_cycles=noc["measure_cycles"],
            drain_cycles=noc["drain_cycles"], seed=run["seed"],
        )
    except ValueError as exc:
        raise UserError(f"noc: {exc}") from None


def check_footprint(cfg: dict) -> None:
    """Refuse (ConfigError naming the key) a run whose largest shard would not fit in this machine's memory."""
    noc, run = cfg["noc"], cfg["run"]
    rows, cols = noc["k"] or noc["rows"] or 8, noc["k"] or noc["cols"] or 8
    grid = "noc.k" if noc["k"] else "noc.rows x noc.cols"
    cycles = noc["warmup_cycles"] + noc["measure_cycles"] + noc["drain_cycles"]
    est = footprint.noc_estimate(rows, cols, noc["vcs"], noc["vc_buffers"], footprint.least_shards(run["shards"]),
                                 cycles, grid)
    found = footprint.problem(est, {grid: noc["k"] or f"{rows} x {cols}",
                                    "noc.warmup_cycles + measure_cycles + drain_cycles": f"{cycles:,} cycles"})
    if found:
        raise ConfigError("config", [Issue(*found)])

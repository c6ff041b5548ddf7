"""``rdasim noc``: run the configured offered loads and collect their tables.

Each offered load is one simulation, cut into the configured shards and run on the
chosen backend. On Ray, single-shard loads of a curve run side by side as Ray tasks
(the cores are better spent on independent loads than on one load's shards); sharded
loads run one after another, each as a group of shard actors.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from cluster.config import config_hash
from cluster.config.noc import booksim_reference, check_footprint, params_of, rates_of
from cluster.jobs.grid import cut_grid, epoch_length, owner_map
from cluster.jobs.noc_model import NocModel
from cluster.jobs.summarised import Summarised
from cluster.parallel.model import ProgressFn
from cluster.parallel.shard_plan import Plan, plan_shards
from cluster.parallel.simulate import simulate
from cluster.progress import Progress, WorkEta
from cluster.results import io, layout, schemas
from cluster.sweep.cost import prior
from sim.noc.params import NocParams
from sim.noc.summary import link_columns, summarize_noc
from sim.noc.topology import Region


@dataclass(frozen=True)
class NocGrid:
    """One offered load of the NoC, its grid cut into rectangles (a Decomposition)."""

    p: NocParams
    pilots: ClassVar[bool] = True

    @property
    def horizon(self) -> int:
        return self.p.warmup_cycles + self.p.measure_cycles + self.p.drain_cycles

    @property
    def expected_cycles(self) -> int:
        return self.p.warmup_cycles + self.p.measure_cycles  # a load that drains stops soon after

    def regions(self, shards: int, cut: str) -> list[Region]:
        return cut_grid(self.p.rows, self.p.cols, shards, cut)

    def model(self, regions: list[Region]) -> NocModel:
        return NocModel(self.p, owner_map(regions, self.p.rows, self.p.cols))

    def epoch(self, regions: list[Region], requested: int | None) -> tuple[int, int | None]:
        return epoch_length(self.p, regions, requested)


@dataclass
class NocResult:
    rows: list[dict]  # one summary dict per offered load (JSON-ready)
    summary: pa.Table
    links: pa.Table
    files: list[Path]
    record: dict = field(default_factory=dict)  # run.json: identity, config, loads missing
    missing: list[float] = field(default_factory=list)  # loads not simulated (the run was interrupted)

    @property
    def interrupted(self) -> bool:
        return bool(self.missing)


def run_id_for(cfg_hash: str, seed: int) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{cfg_hash}-s{seed}-{stamp}"


def simulate_noc(p: NocParams, shards: int | str = 1, cut: str = "rows", backend: str = "local",
                 epoch: int | None = None, address: str | None = None, progress: ProgressFn | None = None,
                 plan: Plan | None = None) -> Summarised:
    """Run one offered load: its summary (sim/noc/summary.py) and its links' columns."""
    sim = simulate(NocGrid(p), shards, cut, backend, epoch, address, progress, plan)
    o = sim.outcome
    return Summarised(summarize_noc(p, o.reports, o.saturated, o.in_transit_flits),
                      {"links": link_columns(p, o.reports)}, sim)


def run_noc(cfg: dict, out: str | Path | layout.RunOutput | None = None, quiet: bool = False) -> NocResult:
    """Simulate every offered load of a resolved noc config (writing the tables if ``out`` is given).

    Ctrl-C (or SIGTERM turned into KeyboardInterrupt) keeps the loads that finished: the
    result then lists the ``missing`` ones, and is written like a whole curve.
    """
    run = cfg["run"]
    check_footprint(cfg)
    rates = rates_of(cfg)
    plist = [params_of(cfg, r) for r in rates]
    grid = NocGrid(plist[0])
    plan = plan_shards(run["shards"], grid, run["cut"], run["backend"], run["address"])  # a curve: its first load
    # checked here, before any load runs (a Ray task would wrap the error)
    grid.epoch(grid.regions(plan.shards, run["cut"]), run["epoch"])
    # one load chosen to run in one process runs here; a curve's loads still run side by side on Ray
    backend = plan.backend(run["backend"]) if len(plist) == 1 else run["backend"]
    chash = config_hash(cfg)
    meta = schemas.RunMeta(run_id_for(chash, run["seed"]), chash, run["seed"])
    loads: list[Summarised | None] = [None] * len(plist)
    try:
        if backend == "ray" and plan.shards == 1 and len(plist) > 1:
            _curve_as_ray_tasks(plist, plan, run, quiet, loads)
        else:
            for i, p in enumerate(plist):
                prog = Progress(f"noc rate {p.rate:g}", quiet, bound=True)  # drained loads stop early
                one = loads[i] = simulate_noc(p, plan.shards, run["cut"], backend, run["epoch"], run["address"], prog,
                                              plan)
                prog.close(f"noc rate {p.rate:g}: done in {one.simulation.outcome.wall_seconds:.1f} s")
    except KeyboardInterrupt:
        if not any(loads):
            raise
    rows, link_parts = [], []
    for p, load in zip(plist, loads):
        if load is None:
            continue
        sim = load.simulation
        row = {
            "topology": p.topology, "rows": p.rows, "cols": p.cols, "traffic": p.traffic,
            "packet_flits": p.packet_flits, "vcs": p.vcs, "vc_buffers": p.vc_buffers,
            "shards": sim.shards, "backend": backend, "rate": p.rate, **load.summary,
            "lookahead": sim.lookahead or 0, "wall_seconds": sim.outcome.wall_seconds, **sim.distribution,
            "booksim_latency": booksim_reference(p),
        }
        rows.append(row)
        links = load.tables["links"]
        links["offered_rate"] = [p.rate] * len(links["flits"])
        link_parts.append(schemas.NOC_LINKS.build(links, meta))
    cols = [c.name for c in schemas.NOC_SUMMARY.columns]
    summary = schemas.NOC_SUMMARY.build({c: [r[c] for r in rows] for c in cols}, meta)
    links_table = pa.concat_tables(link_parts)
    missing = [p.rate for p, load in zip(plist, loads) if load is None]
    record = {"run_id": meta.run_id, "config_hash": chash, "config": cfg, **schemas.code_identity(),
              "complete": not missing, "missing_rates": missing}
    result = NocResult(rows, summary, links_table, [], record, missing)
    if out is not None:
        result.files = write_noc(result, out)
    return result


def write_noc(result: NocResult, out: str | Path | layout.RunOutput) -> list[Path]:
    """The noc_summary and noc_links tables and run.json in ``out`` (each atomically; cluster/results/layout.py)."""
    rid = result.record["run_id"]
    return [io.write_parquet(result.summary, layout.table_path(out, "noc_summary", rid)),
            io.write_parquet(result.links, layout.table_path(out, "noc_links", rid)),
            io.write_json(result.record, layout.side_path(out, "run.json", rid))]


def _curve_as_ray_tasks(plist: list[NocParams], plan: Plan, run: dict, quiet: bool,
                        loads: list[Summarised | None]) -> None:
    """Each load a Ray task run in one process; ``loads[i]`` is filled as load i finishes (so
    an interrupt keeps it)."""
    from cluster.parallel.ray_env import init_ray

    ray = init_ray(run["address"])
    task = ray.remote(num_cpus=1)(simulate_noc)
    refs = [task.remote(p, plan.shards, run["cut"], "local", run["epoch"], plan=plan) for p in plist]
    index = {ref: i for i, ref in enumerate(refs)}
    eta = WorkEta(int(ray.cluster_resources().get("CPU", 1)) or 1)  # a load's cost grows with its rate
    for i, p in enumerate(plist):
        eta.add(i, (), prior("noc", {"noc": {"rows": p.rows, "cols": p.cols, "rate": p.rate}}))
        eta.started(i)
    prog = Progress("noc curve on ray", quiet, eta=eta.remaining)
    start, done = time.perf_counter(), 0
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)  # a progress line every few seconds
            for ref in ready:
                load = loads[index[ref]] = ray.get(ref)
                load.simulation.outcome.extra["curve_wall_seconds"] = time.perf_counter() - start
                eta.finished(index[ref], None)  # as long as it held its slot (its compile included)
            done += len(ready)
            prog(done, len(refs), unit="loads")
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        prog.close()

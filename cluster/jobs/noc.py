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

import pyarrow as pa

from cluster.config import config_hash
from cluster.config.noc import booksim_reference, check_footprint, params_of, rates_of
from cluster.parallel.backends import RunOutcome, noc_model, run_backend
from cluster.parallel.distribution import distribution_figures
from cluster.parallel.regions import cut_grid, epoch_length
from cluster.parallel.shard_plan import plan_shards
from cluster.progress import Progress
from cluster.results import io, layout, schemas
from sim.noc.summary import link_columns, summarize_noc


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


def _plan(p, shards: int | str, cut: str, backend: str, address: str | None):
    """(plan, seconds it took): the shard count to run (cluster/parallel/shard_plan.py)."""
    a = time.perf_counter()
    horizon = p.warmup_cycles + p.measure_cycles + p.drain_cycles
    plan = plan_shards(shards, lambda regs: noc_model(p, regs), p, p.rows, p.cols, cut, backend, horizon, address,
                       expected_cycles=p.warmup_cycles + p.measure_cycles)
    return plan, time.perf_counter() - a


def simulate_noc(p, shards: int | str = 1, cut: str = "rows", backend: str = "local", epoch: int | None = None,
                 address: str | None = None, progress=None) -> tuple[dict, RunOutcome]:
    """Run one NocParams and return (summary row, backend outcome): for tests and benchmarks."""
    plan, plan_seconds = _plan(p, shards, cut, backend, address)
    backend = plan.backend(backend)
    regions = cut_grid(p.rows, p.cols, plan.shards, cut)
    e, _ = epoch_length(p, regions, epoch)
    o = run_backend(backend, p, regions, e, address=address, progress=progress)
    s = summarize_noc(p, o.reports, o.saturated, o.in_transit_flits)
    o.extra.update(distribution_figures(plan, o, plan_seconds))
    return s, o


def _run_one_local(params, regions, epoch):
    from cluster.parallel.local import run_local

    return run_local(params, regions, epoch)


def run_noc(cfg: dict, out: str | Path | layout.RunOutput | None = None, quiet: bool = False) -> NocResult:
    """Simulate every offered load of a resolved noc config (writing the tables if ``out`` is given).

    Ctrl-C (or SIGTERM turned into KeyboardInterrupt) keeps the loads that finished: the
    result then lists the ``missing`` ones, and is written like a whole curve.
    """
    run = cfg["run"]
    check_footprint(cfg)
    rates = rates_of(cfg)
    plist = [params_of(cfg, r) for r in rates]
    p0 = plist[0]
    plan, plan_seconds = _plan(p0, run["shards"], run["cut"], run["backend"], run["address"])  # a curve: its first load
    regions = cut_grid(p0.rows, p0.cols, plan.shards, run["cut"])
    # one load chosen to run in one process runs here; a curve's loads still run side by side on Ray
    backend = plan.backend(run["backend"]) if len(plist) == 1 else run["backend"]
    epoch, lookahead = epoch_length(p0, regions, run["epoch"])
    chash = config_hash(cfg)
    meta = schemas.RunMeta(run_id_for(chash, run["seed"]), chash, run["seed"])
    outcomes: list[RunOutcome | None] = [None] * len(plist)
    try:
        if backend == "ray" and len(regions) == 1 and len(plist) > 1:
            _curve_as_ray_tasks(plist, regions, epoch, run["address"], quiet, outcomes)
        else:
            for i, p in enumerate(plist):
                prog = Progress(f"noc rate {p.rate:g}", quiet, bound=True)  # drained loads stop early
                outcome = run_backend(backend, p, regions, epoch, address=run["address"], progress=prog)
                outcomes[i] = outcome
                prog.close(f"noc rate {p.rate:g}: done in {outcome.wall_seconds:.1f} s")
    except KeyboardInterrupt:
        if not any(outcomes):
            raise
    rows, link_parts = [], []
    for p, o in zip(plist, outcomes):
        if o is None:
            continue
        s = summarize_noc(p, o.reports, o.saturated, o.in_transit_flits)
        row = {
            "topology": p.topology, "rows": p.rows, "cols": p.cols, "traffic": p.traffic,
            "packet_flits": p.packet_flits, "vcs": p.vcs, "vc_buffers": p.vc_buffers,
            "shards": len(regions), "backend": backend, "rate": p.rate, **s,
            "lookahead": lookahead or 0, "wall_seconds": o.wall_seconds,
            **distribution_figures(plan, o, plan_seconds),
            "booksim_latency": booksim_reference(p),
        }
        rows.append(row)
        links = link_columns(p, o.reports)
        links["offered_rate"] = [p.rate] * len(links["flits"])
        link_parts.append(schemas.NOC_LINKS.build(links, meta))
    cols = [c.name for c in schemas.NOC_SUMMARY.columns]
    summary = schemas.NOC_SUMMARY.build({c: [r[c] for r in rows] for c in cols}, meta)
    links_table = pa.concat_tables(link_parts)
    missing = [p.rate for p, o in zip(plist, outcomes) if o is None]
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


def _curve_as_ray_tasks(plist, regions, epoch, address, quiet, outcomes: list) -> None:
    """Each load a Ray task; ``outcomes[i]`` is filled as load i finishes (so an interrupt keeps it)."""
    from cluster.parallel.ray_env import init_ray

    ray = init_ray(address)
    task = ray.remote(num_cpus=1)(_run_one_local)
    refs = [task.remote(p, regions, epoch) for p in plist]
    index = {ref: i for i, ref in enumerate(refs)}
    prog = Progress("noc curve on ray", quiet)
    start, done = time.perf_counter(), 0
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                outcomes[index[ref]] = ray.get(ref)
                outcomes[index[ref]].extra["curve_wall_seconds"] = time.perf_counter() - start
            done += len(ready)
            prog(done, len(refs), unit="loads")
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        prog.close()

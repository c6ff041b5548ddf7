"""``rdasim run``: simulate a workload on the CU/MU grid and collect its tables.

``ChipModel`` adapts chip shards to the shard contract (cluster/parallel/model.py): it
builds a ChipShard per region, routes a shard's outbound network traffic and message
records to the shards owning their destinations, packs them for the wire, and stops
when no shard has anything left to do (or at ``run.max_cycles``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from cluster.config import config_hash
from cluster.jobs.chip_model import ChipModel
from cluster.jobs.grid import cut_figures, cut_grid, epoch_length
from cluster.jobs.noc import run_id_for
from cluster.jobs.summarised import Summarised
from cluster.parallel.model import CutFigures, ProgressFn
from cluster.parallel.simulate import Simulation, simulate
from cluster.progress import Progress
from cluster.results import io, layout, schemas
from sim.chip import memory_map
from sim.chip.config import ChipConfig
from sim.chip.report import summarize_chip
from sim.chip.shard import ChipShard
from sim.chip.trace import chrome_trace
from sim.energy.accelergy import accelergy_files
from sim.noc.topology import Region


@dataclass(frozen=True)
class ChipGrid:
    """One chip run, its CU/MU grid cut into rectangles (a Decomposition)."""

    cfg: ChipConfig
    pilots: ClassVar[bool] = True

    @property
    def horizon(self) -> int:
        return self.cfg.max_cycles

    @property
    def expected_cycles(self) -> int:
        return self.cfg.max_cycles  # no better guess: a long run is the assumption

    def regions(self, shards: int, cut: str) -> list[Region]:
        return cut_grid(self.cfg.spec.rows, self.cfg.spec.cols, shards, cut)

    def model(self, regions: list[Region]) -> ChipModel:
        return ChipModel(self.cfg, regions)

    def epoch(self, regions: list[Region], requested: int | None) -> tuple[int, int | None]:
        return epoch_length(self.cfg.noc, regions, requested)

    def cut_figures(self, shard: ChipShard, regions: list[Region]) -> CutFigures:
        return cut_figures(self.cfg.noc, shard.net.link_totals(), shard.t, regions)


@dataclass
class RunResult:
    summary: dict  # JSON-ready figures (rdasim run --json)
    tables: dict[str, pa.Table]
    simulation: Simulation
    files: list[Path] = field(default_factory=list)
    trace: dict | None = None
    memory_map: str | None = None
    write_error: OSError | None = None  # the files could not be written (the figures are still here)


def simulate_chip(chip_cfg: ChipConfig, shards: int | str = 1, cut: str = "rows", backend: str = "local",
                  epoch: int | None = None, address: str | None = None,
                  progress: ProgressFn | None = None) -> Summarised:
    """Run one ChipConfig: its summary and tables' columns (sim/chip/report.py) with the run's
    shards, lookahead, status and distribution. ``shards = "auto"``: the count a pilot predicts
    fastest (cluster/parallel/shard_plan.py)."""
    sim = simulate(ChipGrid(chip_cfg), shards, cut, backend, epoch, address, progress)
    o = sim.outcome
    summary, tables = summarize_chip(chip_cfg, o.reports, cut_off=o.saturated)
    summary.update(shards=sim.shards, backend=sim.backend, wall_seconds=o.wall_seconds,
                   lookahead=sim.lookahead or 0, cut_off=bool(o.saturated), **sim.distribution)
    if o.saturated and not summary["completed"]:  # events were still pending: not a deadlock
        last = max(r.end_cycle for r in o.reports)
        summary.update(status="cut_off", status_detail=f"cut off at run.max_cycles = {chip_cfg.max_cycles:,} cycles: "
                       f"every event before it was simulated (the last at cycle {last:,}), none after")
    return Summarised(summary, tables, sim)


def run_chip(cfg: dict, chip_cfg, out: str | Path | layout.RunOutput | None = None,
             trace_path: str | Path | None = None, memory_map_cycle: int = -1, quiet: bool = False) -> RunResult:
    """Simulate a resolved ``rdasim run`` config; write its tables if ``out`` is given."""
    run = cfg["run"]
    prog = Progress(f"run {chip_cfg.workload.kind}", quiet, bound=True)  # max_cycles is a bound, not the end
    done = simulate_chip(chip_cfg, run["shards"], run["cut"], run["backend"], run["epoch"], run["address"],
                         progress=prog)
    prog.close()
    summary, cols, results = done.summary, done.tables, done.simulation.outcome.reports
    chash = config_hash(cfg)
    meta = schemas.RunMeta(run_id_for(chash, run["seed"]), chash, run["seed"])
    row = {c.name: summary.get(c.name) for c in schemas.RUN_SUMMARY.columns}
    for k, v in summary["messages"].items():
        row[f"messages_{k}"] = v
    tables = {
        "run_summary": schemas.RUN_SUMMARY.build(row, meta),
        "run_mu_series": schemas.RUN_MU_SERIES.build(cols["mu_series"], meta),
        "run_buffers": schemas.RUN_BUFFERS.build(cols["buffers"], meta),
        "run_links": schemas.RUN_LINKS.build(cols["links"], meta),
        "run_energy": schemas.RUN_ENERGY.build(cols["energy"], meta),
    }
    if "requests" in cols:  # a decode run: its requests' latencies
        tables["run_requests"] = schemas.RUN_REQUESTS.build(cols["requests"], meta)
    if "partitions" in cols:  # a mapped (dataflow) run
        tables["run_partitions"] = schemas.RUN_PARTITIONS.build(cols["partitions"], meta)
        tables["run_kernels"] = schemas.RUN_KERNELS.build(cols["kernels"], meta)
    res = RunResult(summary, tables, done.simulation)
    try:
        _write(res, cfg, chip_cfg, meta, results, out, trace_path, memory_map_cycle)
    except OSError as exc:  # the run is done: keep its figures (the command prints them)
        res.write_error = exc
    return res


def _write(res, cfg, chip_cfg, meta, results, out, trace_path, memory_map_cycle) -> None:
    summary, tables, chash = res.summary, res.tables, meta.config_hash
    if trace_path is not None:
        res.trace = chrome_trace(chip_cfg, results, summary["oracle_first"])
        res.files.append(io.write_text(json.dumps(res.trace), trace_path))
    if memory_map_cycle >= 0:
        snap = memory_map.merge_snapshots([r.memory_map for r in results])
        res.memory_map = memory_map.render(chip_cfg, snap, memory_map_cycle)
        where = out if out is not None else Path(".")
        res.files.append(io.write_text(res.memory_map, layout.side_path(where, f"memory_map_{memory_map_cycle}.txt",
                                                                        meta.run_id)))
        res.files.append(io.write_json(snap, layout.side_path(where, f"memory_map_{memory_map_cycle}.json",
                                                              meta.run_id)))
    if out is not None:
        for name, table in tables.items():
            res.files.append(io.write_parquet(table, layout.table_path(out, name, meta.run_id)))
        e = tables["run_energy"]
        cols = ("component", "action", "count", "energy_per_action_pj")
        for name, text in accelergy_files(*(e[c].to_pylist() for c in cols)).items():  # counts and their ERT
            res.files.append(io.write_text(text, layout.side_path(out, name, meta.run_id)))
        res.files.append(io.write_json({"run_id": meta.run_id, "config_hash": chash, "config": cfg,
                                        "summary": summary, **schemas.code_identity()},
                                       layout.side_path(out, "run.json", meta.run_id)))

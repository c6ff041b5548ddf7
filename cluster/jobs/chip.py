"""``rdasim run`` on one chip: a workload on the CU/MU grid, cut into rectangles (``ChipGrid``,
whose shards ``ChipModel`` runs, cluster/jobs/chip_model.py), and the job that makes a run's
tables and side files of it (``ChipJob``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from cluster.config.run import chip_config
from cluster.errors import UserError
from cluster.jobs.chip_model import ChipModel
from cluster.jobs.grid import cut_figures, cut_grid, epoch_length
from cluster.jobs.job import Case, result, simulate_case
from cluster.jobs.summarised import Summarised
from cluster.jobs.tables import declared_tables
from cluster.parallel.model import CutFigures, ProgressFn
from cluster.parallel.simulate import Simulation
from cluster.results import schemas
from cluster.results.record import Result
from sim.chip import memory_map
from sim.chip.config import ChipConfig
from sim.chip.report import summarize_chip
from sim.chip.shard import ChipShard
from sim.chip.trace import chrome_trace
from sim.energy.accelergy import accelergy_files
from sim.noc.topology import Region

CHIP_TABLES = ("run_mu_series", "run_buffers", "run_links", "run_energy")  # every chip run's, beside run_summary


@dataclass(frozen=True)
class ChipGrid:
    """One chip run, its CU/MU grid cut into rectangles (a Decomposition)."""

    cfg: ChipConfig
    sink: Any = field(default=None, compare=False)  # told how its programs go (a serve run's phases), here only
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
        return ChipModel(self.cfg, regions, self.sink)

    def watched(self, sink: Any) -> "ChipGrid":
        return replace(self, sink=sink)

    def epoch(self, regions: list[Region], requested: int | None) -> tuple[int, int | None]:
        return epoch_length(self.cfg.noc, regions, requested)

    def cut_figures(self, shard: ChipShard, regions: list[Region]) -> CutFigures:
        return cut_figures(self.cfg.noc, shard.net.link_totals(), shard.t, regions)

    def summarise(self, sim: Simulation) -> Summarised:
        o = sim.outcome
        summary, tables = summarize_chip(self.cfg, o.reports, cut_off=o.saturated)
        summary.update(shards=sim.shards, backend=sim.backend, wall_seconds=o.wall_seconds,
                       lookahead=sim.lookahead or 0, cut_off=bool(o.saturated), **sim.distribution)
        if o.saturated and not summary["completed"]:  # events were still pending: not a deadlock
            last = max(r.end_cycle for r in o.reports)
            summary.update(status="cut_off", status_detail=f"cut off at run.max_cycles = {self.cfg.max_cycles:,} "
                           f"cycles: every event before it was simulated (the last at cycle {last:,}), none after")
        return Summarised(summary, tables, sim)


def simulate_chip(chip_cfg: ChipConfig, shards: int | str = 1, cut: str = "rows", backend: str = "local",
                  epoch: int | None = None, address: str | None = None,
                  progress: ProgressFn | None = None) -> Summarised:
    """Run one ChipConfig: its summary and tables' columns (sim/chip/report.py) with the run's
    shards, lookahead, status and distribution. ``shards = "auto"``: the count a pilot predicts
    fastest (cluster/parallel/shard_plan.py)."""
    return simulate_case(ChipGrid(chip_cfg), shards, cut, backend, epoch, address, progress)


@dataclass
class ChipJob:
    """``rdasim run`` on one chip: a resolved config, its ChipConfig checked across fields.
    ``trace``: record a Chrome trace (side file trace.json); ``memory_map``: every MU's block
    map at that cycle (memory_map_CYCLE.txt and .json)."""

    cfg: dict
    trace: bool = False
    memory_map: int | None = None
    command: ClassVar[str] = "run"

    def __post_init__(self) -> None:
        if self.memory_map is not None and self.memory_map < 0:
            raise UserError(f"memory_map = {self.memory_map}: the cycle cannot be negative")
        at = -1 if self.memory_map is None else self.memory_map
        self.chip = chip_config(self.cfg, trace=self.trace, memory_map=at)

    def cases(self) -> list[Case]:
        return [Case(ChipGrid(self.chip), f"run {self.chip.workload.kind}")]  # max_cycles is a bound, not the end

    def record(self, done: Sequence[Summarised | None], meta: schemas.RunMeta) -> Result:
        """run_summary, run_mu_series, run_buffers, run_links, run_energy and the tables the
        workload declares (``TABLES``: run_requests of a decode run, run_partitions and run_kernels
        of a mapped one, ...); Accelergy's files of the energy counts, and the trace and memory
        map when asked for."""
        (one,) = done
        assert one is not None  # a single case: interrupted before it finished, execute raised
        summary, cols, reports = one.summary, one.tables, one.simulation.outcome.reports
        row = {c.name: summary.get(c.name) for c in schemas.RUN_SUMMARY.columns}
        for k, v in summary["messages"].items():
            row[f"messages_{k}"] = v
        workload = self.chip.workload
        tables = {"run_summary": schemas.RUN_SUMMARY.build(row, meta),
                  **declared_tables(CHIP_TABLES + workload.TABLES, cols, meta, f"workload {workload.kind}")}
        e = tables["run_energy"]
        names = ("component", "action", "count", "energy_per_action_pj")
        files: dict[str, Any] = dict(accelergy_files(*(e[c].to_pylist() for c in names)))  # counts and their ERT
        if self.trace:
            files["trace.json"] = json.dumps(chrome_trace(self.chip, reports, summary["oracle_first"]))
        if self.memory_map is not None:
            snap = memory_map.merge_snapshots([r.memory_map for r in reports])
            files[f"memory_map_{self.memory_map}.txt"] = memory_map.render(self.chip, snap, self.memory_map)
            files[f"memory_map_{self.memory_map}.json"] = snap
        return result(self.command, meta, self.cfg, summary["status"], summary["status_detail"], summary, tables,
                      files, [one.simulation])


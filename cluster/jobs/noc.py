"""``rdasim noc``: the configured offered loads, one simulation each, and their tables.

Each offered load is one case of the job (cluster/jobs/job.py), cut into the configured
shards and run on the chosen backend. On Ray, single-shard loads of a curve run side by
side as Ray tasks; sharded loads run one after another, each as a group of shard actors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from cluster.config.noc import booksim_reference, check_footprint, params_of, rates_of
from cluster.jobs.grid import cut_figures, cut_grid, epoch_length, owner_map
from cluster.jobs.job import Case, execute, result, simulate_case
from cluster.jobs.noc_model import NocModel
from cluster.jobs.summarised import Summarised
from cluster.parallel.model import CutFigures, ProgressFn
from cluster.parallel.shard_plan import Plan
from cluster.parallel.simulate import Simulation
from cluster.results import schemas
from cluster.results.record import Result
from cluster.sweep.cost import prior
from sim.noc.params import NocParams
from sim.noc.shard import NocShard
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

    def cut_figures(self, shard: NocShard, regions: list[Region]) -> CutFigures:
        return cut_figures(self.p, shard.link_totals(), shard.t, regions)

    def summarise(self, sim: Simulation) -> Summarised:
        o = sim.outcome
        return Summarised(summarize_noc(self.p, o.reports, o.saturated, o.in_transit_flits),
                          {"links": link_columns(self.p, o.reports)}, sim)


def simulate_noc(p: NocParams, shards: int | str = 1, cut: str = "rows", backend: str = "local",
                 epoch: int | None = None, address: str | None = None, progress: ProgressFn | None = None,
                 plan: Plan | None = None) -> Summarised:
    """Run one offered load: its summary (sim/noc/summary.py) and its links' columns."""
    return simulate_case(NocGrid(p), shards, cut, backend, epoch, address, progress, plan)


@dataclass
class NocJob:
    """``rdasim noc``: every offered load of a resolved noc config, one simulation each."""

    cfg: dict
    command: ClassVar[str] = "noc"

    def __post_init__(self) -> None:
        check_footprint(self.cfg)
        self.loads = [params_of(self.cfg, r) for r in rates_of(self.cfg)]

    def cases(self) -> list[Case]:
        return [Case(NocGrid(p), f"noc rate {p.rate:g}", says_done=True,
                     cost=prior("noc", {"noc": {"rows": p.rows, "cols": p.cols, "rate": p.rate}})) for p in self.loads]

    def record(self, done: Sequence[Summarised | None], meta: schemas.RunMeta) -> Result:
        """noc_summary (a row per load simulated) and noc_links; loads not simulated (the run was
        interrupted) are listed in the figures' ``missing_rates``, and the status is then "interrupted"."""
        run = self.cfg["run"]
        # a load chosen to run in one process ran there; a curve's loads are the curve's backend's
        one_load = len(self.loads) == 1
        rows, link_parts, sims = [], [], []
        for p, load in zip(self.loads, done):
            if load is None:
                continue
            sim = load.simulation
            sims.append(sim)
            row = {
                "topology": p.topology, "rows": p.rows, "cols": p.cols, "traffic": p.traffic,
                "packet_flits": p.packet_flits, "vcs": p.vcs, "vc_buffers": p.vc_buffers,
                "shards": sim.shards, "backend": sim.backend if one_load else run["backend"], "rate": p.rate,
                **load.summary, "lookahead": sim.lookahead or 0, "wall_seconds": sim.outcome.wall_seconds,
                **sim.distribution, "booksim_latency": booksim_reference(p),
            }
            rows.append(row)
            links = load.tables["links"]
            links["offered_rate"] = [p.rate] * len(links["flits"])
            link_parts.append(schemas.NOC_LINKS.build(links, meta))
        cols = [c.name for c in schemas.NOC_SUMMARY.columns]
        tables = {"noc_summary": schemas.NOC_SUMMARY.build({c: [r[c] for r in rows] for c in cols}, meta),
                  "noc_links": pa.concat_tables(link_parts)}
        missing = [p.rate for p, load in zip(self.loads, done) if load is None]
        status, detail = ("interrupted", f"{len(rows)} of {len(self.loads)} loads finished; missing rates "
                          + ", ".join(f"{r:g}" for r in missing)) if missing else ("completed", "")
        return result(self.command, meta, self.cfg, status, detail, {"loads": rows, "missing_rates": missing}, tables,
                      simulations=sims)


def run_noc(cfg: dict, quiet: bool = False) -> Result:
    """Simulate every offered load of a resolved noc config (cluster/jobs/job.py ``execute``)."""
    return execute(NocJob(cfg), quiet)

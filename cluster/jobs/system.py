"""``rdasim run`` with a [system]: chips as nodes of the inter-chip network, grouped into shards.

``SystemModel`` adapts system shards (sim/system/shard.py) to the shard contract: shards
are contiguous groups of chips (a switch goes with the first chip of its group), the links
between groups are the cuts, and their least latency is the lookahead, so an epoch is
hundreds of cycles or more. The run stops when no shard has anything left to do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

import numpy as np

from cluster.errors import UserError
from cluster.jobs.job import Case, result, simulate_case
from cluster.jobs.summarised import Summarised
from cluster.jobs.system_model import SystemModel, SystemResult, owners
from cluster.jobs.tables import declared_tables
from cluster.parallel.model import ProgressFn
from cluster.parallel.simulate import Simulation
from cluster.results import schemas
from cluster.results.record import Result
from sim.system.config import SystemConfig
from sim.system.network import SystemNet
from sim.system.records import StepRecord


def groups(cfg: SystemConfig, shards: int) -> list[list[int]]:
    """Nodes of each shard: chips in contiguous blocks, each switch with its group's first chip."""
    g = cfg.graph
    if not 1 <= shards <= g.chips:
        raise UserError(f"run.shards = {shards}: a system of {g.chips} chips takes 1 to {g.chips} shards")
    edges = [round(i * g.chips / shards) for i in range(shards + 1)]
    out = [list(range(edges[i], edges[i + 1])) for i in range(shards)]
    owner = np.zeros(g.nodes, dtype=np.int64)
    for i, nodes in enumerate(out):
        owner[nodes] = i
    for (_dim, first), sw in sorted(g.switch_of.items()):
        out[int(owner[first])].append(sw)
    return out


def lookahead(cfg: SystemConfig, net: SystemNet, owner: np.ndarray) -> int:
    """Least latency of a link that bounds an epoch (0: none does; sim/system/config.py)."""
    return net.lookahead(cfg.level.lookahead_links(net, owner))


@dataclass(frozen=True)
class SystemGroups:
    """One system run, its chips in contiguous groups (a Decomposition): the links between
    groups are the cuts, and a pilot does not apply."""

    cfg: SystemConfig
    sink: Any = field(default=None, compare=False)  # told how its programs go (a serve run's phases), here only
    pilots: ClassVar[bool] = False

    @property
    def horizon(self) -> int:
        return self.cfg.max_cycles

    @property
    def expected_cycles(self) -> int:
        return self.cfg.max_cycles

    def regions(self, shards: int, cut: str) -> list[list[int]]:
        return groups(self.cfg, shards)

    def model(self, regions: list[list[int]]) -> SystemModel:
        return SystemModel(self.cfg, regions, self.sink)

    def watched(self, sink: Any) -> "SystemGroups":
        return replace(self, sink=sink)

    def epoch(self, regions: list[list[int]], requested: int | None) -> tuple[int, int | None]:
        la = lookahead(self.cfg, self.cfg.net(), owners(self.cfg, regions))
        if requested is not None and la and requested > la:
            raise UserError(f"run.epoch = {requested} cycles is longer than the least latency of a link between "
                            f"shards ({la} cycles); use run.epoch <= {la} or leave it unset")
        return requested or la or (1 << 40), la

    def summarise(self, sim: Simulation) -> Summarised:
        o = sim.outcome
        summary, tables = summarize_system(self.cfg, o.reports)
        summary.update(shards=sim.shards, backend=sim.backend, wall_seconds=o.wall_seconds, epochs=o.epochs,
                       lookahead=sim.lookahead, cut_off=bool(o.saturated))
        summary.update(_status(summary, o.reports, self.cfg))
        return Summarised(summary, tables, sim)


def simulate_system(cfg: SystemConfig, shards: int | str = 1, backend: str = "local", epoch: int | None = None,
                    address: str | None = None, progress: ProgressFn | None = None) -> Summarised:
    """Run a system: its summary (status included) and tables' columns."""
    return simulate_case(SystemGroups(cfg), counted(shards), "groups", backend, epoch, address, progress)


def counted(shards: int | str) -> int:
    """A system's shard count: a count of chip groups, never "auto" (no pilot chooses one)."""
    if not isinstance(shards, int):
        raise UserError("run.shards = \"auto\" chooses among cuts of one grid; a system of chips takes a count "
                        "of chip groups")
    return shards


def _done(summary: dict, results: list[SystemResult]) -> bool:
    """Every work item finished, and every grid chip's run completed."""
    return sum(r.work[1] for r in results) >= sum(r.work[0] for r in results) and summary.get("completed", True)


def _status(summary: dict, results: list[SystemResult], cfg: SystemConfig) -> dict:
    """completed, cut_off (system.max_seconds / run.max_cycles) or deadlocked (nothing left to
    happen anywhere while work remains), as for one chip's run."""
    created = sum(r.work[0] for r in results)
    finished = sum(r.work[1] for r in results)
    done = _done(summary, results)
    if summary["cut_off"] and not done:
        return {"completed": False, "status": "cut_off",
                "status_detail": f"cut off at {cfg.max_cycles:,} cycles ({cfg.max_cycles / cfg.clock_hz:.6g} s): every "
                                 "event before it was simulated, none after"}
    if not done:
        detail = f"{created - finished} of {created} work items never finished and nothing was left to happen on " \
                 "any chip or link"
        if summary.get("chip_status_detail"):
            detail += f"; {summary['chip_status_detail']}"
        return {"completed": False, "status": "deadlocked", "status_detail": detail}
    return {"completed": True, "status": "completed", "status_detail": ""}


def summarize_system(cfg: SystemConfig, results: list[SystemResult]) -> tuple[dict, dict]:
    end = max(r.end_cycle for r in results)
    records = sorted((x for r in results for x in r.records), key=StepRecord.row)
    link_bytes = np.sum([r.link_bytes for r in results], axis=0)
    w = cfg.workload
    summary = {
        "workload": w.kind, "chips": cfg.graph.chips, "chip": cfg.system.chip.name, "topology": cfg.system.shape,
        "fidelity": cfg.fidelity, "sim_cycles": int(end), "sim_seconds": end / cfg.clock_hz,
        "messages_total": int(sum(r.messages for r in results)), "bytes_total": int(sum(r.bytes_sent for r in results)),
        "compute_cycles": int(sum(sum(r.compute.values()) for r in results)),
    }
    summary.update(w.system_figures(records, cfg))
    chip_rows = _grid_chips(cfg, results, summary) if cfg.level.grid else {}
    end = summary["sim_cycles"]
    links = cfg.net().links
    tables = {
        "steps": {f.name: [getattr(x, f.name) for x in records] for f in fields(StepRecord)},
        "links": {"src": [lk.src for lk in links], "dst": [lk.dst for lk in links],
                  "dim": [cfg.graph.links[i].dim for i in range(len(links))], "bytes": link_bytes.tolist(),
                  "utilization": (link_bytes / np.maximum(1, end) / np.array([lk.bytes_per_cycle for lk in links])
                                  ).tolist()},
    }
    if chip_rows:
        tables["chips"] = chip_rows
    h = hashlib.sha256()
    h.update(repr([x.row() for x in records]).encode())
    h.update(link_bytes.astype("<i8").tobytes())
    h.update(repr(chip_rows.get("result_hash", [])).encode())  # each grid chip's own run
    h.update(repr(sorted((k, v) for k, v in summary.items() if isinstance(v, (int, str)))).encode())
    summary["result_hash"] = h.hexdigest()[:32]
    views, own = w.system_views(records, [x for r in results for x in r.logged], cfg)  # after the hash: views
    summary.update(views)
    tables.update(own)
    if cfg.level.grid:  # after the hash: a function of the chips' oracle logs, each in its chip's hash
        summary.update(system_oracle(results, _done(summary, results)))
    return summary, tables


CHIP_FIGURES = tuple(c.name for c in schemas.SYSTEM_CHIPS.columns if c.name != "chip")


def _grid_chips(cfg: SystemConfig, results: list[SystemResult], summary: dict) -> dict:
    """Grid fidelity: every chip summarised as a run of its own (sim/chip/report.py); the system's
    figures are its slowest chip's. Returns the per-chip table."""
    from sim.chip.report import summarize_chip

    per = {}
    for r in results:
        for c, res in r.chips.items():
            per[c] = summarize_chip(cfg.chip_config(c), [res])[0]
    slowest = max(sorted(per), key=lambda c: per[c]["sim_cycles"])
    worst = per[slowest]
    summary["sim_cycles"] = int(worst["sim_cycles"])
    summary["sim_seconds"] = worst["sim_seconds"]
    summary["compute_cycles"] = int(sum(s["compute_cycles"] for s in per.values()))
    summary["completed"] = all(s["completed"] for s in per.values())
    stuck = [c for c in sorted(per) if not per[c]["completed"]]
    if stuck:  # what the first chip that did not finish says of itself (who waits on what)
        summary["chip_status_detail"] = f"chip {stuck[0]}: {per[stuck[0]].get('status_detail', '')}"
    summary["slowest_chip"] = slowest
    for k, v in worst.items():  # the workload's own figures (simulated beside analytic seconds, ...)
        if k.startswith("seconds_per_") or k == "partitions":
            summary[k] = v
    rows: dict = {"chip": sorted(per)}
    for k in CHIP_FIGURES:
        rows[k] = [per[c].get(k, 0) for c in rows["chip"]]  # figures a chip's workload may not have: 0
    if any(rows["landing_buffers"]):  # tokens other chips wrote into landing buffers (lists: not hashed)
        summary["landing_bytes_per_chip"] = rows["landing_bytes"]
        summary["landing_reserved_per_chip"] = rows["landing_reserved_bytes"]
    return rows


def system_oracle(results: list[SystemResult], completed: bool) -> dict:
    """The shadow oracle's verdict over every grid chip's log at once: a reference to another
    chip's MU is copied and dropped on one chip and freed on the other (sim/memory/oracle.py)."""
    from sim.memory import oracle

    logs = [oracle.system_log(c, res.oracle_log) for r in results for c, res in sorted(r.chips.items())]
    v = oracle.check_log(oracle.merge_logs(logs), completed)
    return {"use_after_free": v.use_after_free, "double_free": v.double_free, "premature_free": v.premature_free,
            "leaks": v.leaks, "live_at_end": v.live_at_end}


@dataclass
class SystemJob:
    """``rdasim run`` with a [system]: a resolved config, its SystemConfig (a plan mapped for grid chips)."""

    cfg: dict
    command: ClassVar[str] = "system"

    def __post_init__(self) -> None:
        from cluster.config.run import system_config

        counted(self.cfg["run"]["shards"])
        self.system = system_config(self.cfg)

    def cases(self) -> list[Case]:
        return [Case(SystemGroups(self.system), f"system {self.system.workload.kind}", bound=False)]

    def record(self, done: Sequence[Summarised | None], meta: schemas.RunMeta) -> Result:
        """system_summary, system_steps, system_links (and system_chips of grid chips, and the
        tables a system workload declares)."""
        (one,) = done
        assert one is not None  # a single case: interrupted before it finished, execute raised
        summary, cols = one.summary, one.tables
        row = {c.name: summary.get(c.name) for c in schemas.SYSTEM_SUMMARY.columns}
        w = self.system.workload
        names = ("system_steps", "system_links") + (("system_chips",) if self.system.level.grid else ())
        # a system workload's own tables (a serving system's run_requests and run_anchors, as a chip
        # run's); a grid chip's workload runs on every chip, and its tables are the chips' own
        names += w.TABLES if w.CAPABILITIES.system else ()
        tables = {"system_summary": schemas.SYSTEM_SUMMARY.build(row, meta),
                  **declared_tables(names, cols, meta, f"workload {w.kind}")}
        return result(self.command, meta, self.cfg, summary["status"], summary["status_detail"], summary, tables,
                      simulations=[one.simulation])


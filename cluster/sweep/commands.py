"""What a sweep can run: a small registry of commands, each a config schema, a job and its result table.

A point of a sweep is one resolved config of its command; the command's job turns it
into named Arrow tables, one of which is the point's result (the rows of the main
dataset). ``noc`` is ``rdasim noc``; ``run`` is ``rdasim run`` (``system`` the same with a
[system]); each imports its job only when used, so a noc sweep never pays for the chip model.
``noop`` echoes its config and exists to test the sweep machinery and measure its overhead.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pyarrow as pa

from cluster.errors import UserError

if TYPE_CHECKING:
    from cluster.config import Table


@dataclass(frozen=True)
class Command:
    """One sweepable command. Functions are module-level so Ray ships them by reference."""

    name: str
    doc: str
    schema: Callable[[], Table]  # the command's config schema
    job: Callable[[dict], dict[str, pa.Table]]  # resolved config -> {table name: table}
    result: str  # name of the table whose rows are the point's result
    result_schema: Callable[[], pa.Schema | None]  # its Arrow schema, when known up front
    check: Callable[[dict], None] = lambda cfg: None  # what the job checks before it simulates (raises UserError)
    listed: bool = True  # offered to users (False: a command for tests and benchmarks)


def tables_of(result) -> dict[str, pa.Table]:
    """Named Arrow tables of a job result (a dict, or an object such as NocResult).

    A table is named by its schema's ``table`` metadata (schemas.TableSchema sets it),
    else by the attribute or key that holds it.
    """
    items = result.items() if isinstance(result, dict) else vars(result).items()
    out = {}
    for key, value in items:
        if isinstance(value, pa.Table):
            meta = value.schema.metadata or {}
            out[meta.get(b"table", key.encode()).decode()] = value
        elif isinstance(value, dict) and value and all(isinstance(v, pa.Table) for v in value.values()):
            out.update(tables_of(value))  # e.g. RunResult.tables
    return out


def pick_result(tables: dict[str, pa.Table], preferred: str) -> str:
    """Name of the result table: the preferred one, else a ``*summary`` table, else the first."""
    if preferred in tables:
        return preferred
    summaries = [n for n in tables if n.endswith("summary")]
    if summaries:
        return summaries[0]
    if not tables:
        raise RuntimeError("the job returned no Arrow tables")
    return next(iter(tables))


def _known_schema(name: str) -> pa.Schema | None:
    from cluster.results import schemas

    return next((t.arrow for t in schemas.ALL_TABLES if t.name == name), None)


# ----------------------------------------------------------------------------- noc
def _noc_schema():
    from cluster.config.noc import NOC_SCHEMA

    return NOC_SCHEMA


def _noc_check(cfg: dict) -> None:
    """What `rdasim noc` checks before simulating: memory, every load's parameters, the shard cut and epoch."""
    from cluster.config.footprint import least_shards
    from cluster.config.noc import check_footprint, params_of, rates_of
    from cluster.jobs.grid import cut_grid, epoch_length

    check_footprint(cfg)
    run = cfg["run"]
    for rate in rates_of(cfg):
        p = params_of(cfg, rate)
        epoch_length(p, cut_grid(p.rows, p.cols, least_shards(run["shards"]), run["cut"]), run["epoch"])


def _noc_job(cfg: dict) -> dict[str, pa.Table]:
    from cluster.jobs.noc import run_noc

    return tables_of(run_noc(cfg, out=None, quiet=True))


# ----------------------------------------------------------------------------- run
def _run_schema():
    from cluster.config.run import RUN_SCHEMA

    return RUN_SCHEMA


def _one_chip(cfg: dict) -> None:
    if cfg["system"]["chips"]:
        raise UserError("a point with a [system] (system.chips >= 1) is a system of chips: use command = \"system\"")


def _run_check(cfg: dict) -> None:
    """What `rdasim run` checks before simulating: chip_config's cross-field checks, the shard cut and epoch."""
    from cluster.config.footprint import least_shards
    from cluster.config.run import chip_config
    from cluster.jobs.grid import cut_grid, epoch_length

    _one_chip(cfg)
    chip = chip_config(cfg)
    run = cfg["run"]
    epoch_length(chip.noc, cut_grid(chip.spec.rows, chip.spec.cols, least_shards(run["shards"]), run["cut"]),
                 run["epoch"])


def _run_job(cfg: dict) -> dict[str, pa.Table]:
    """What `rdasim run CONFIG` does, without its files: chip_config, then run_chip."""
    from cluster.config.run import chip_config
    from cluster.jobs.chip import run_chip

    _one_chip(cfg)
    return tables_of(run_chip(cfg, chip_config(cfg), out=None, quiet=True))


def _system_check(cfg: dict) -> None:
    """What `rdasim run` checks before simulating a [system]: the system config (its plan mapped)."""
    if not cfg["system"]["chips"]:
        raise UserError("sweep command 'system' needs a [system] with system.chips >= 1 in every point; "
                        "use command = \"run\" for one chip")
    from cluster.config.run import system_config

    system_config(cfg)


def _system_job(cfg: dict) -> dict[str, pa.Table]:
    """What `rdasim run CONFIG` does with a [system], without its files."""
    from cluster.config.run import system_config
    from cluster.jobs import system as job

    _system_check(cfg)
    sys_cfg = system_config(cfg)
    run = cfg["run"]
    done = job.simulate_system(sys_cfg, run["shards"], run["backend"], run["epoch"], run["address"])
    return job.system_tables(cfg, done.summary, done.tables)


# ----------------------------------------------------------------------------- noop
def _noop_schema():
    from cluster.config import Field, Table
    from cluster.config.noc import RUN_SECTION

    return Table({
        "noop": Table({
            "value": Field("float", 0.0, "a number echoed back in the result"),
            "sleep": Field("float", 0.0, "seconds to sleep (a stand-in for work)", min=0.0),
            "fail": Field("bool", False, "raise an error (the point becomes an error row)"),
            "crash": Field("bool", False, "kill the worker process (a system failure, retried)"),
            "crash_marker": Field("str", None, "with crash: crash only if this file does not exist yet "
                                  "(creating it), so the retry succeeds"),
            "started_dir": Field("str", None, "on start, write the Ray node id to <started_dir>/<value> "
                                 "(tests see where a point is running)"),
        }, doc="a trivial job for testing sweeps"),
        "run": RUN_SECTION,
    })


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "in-process"


def _noop_job(cfg: dict) -> dict[str, pa.Table]:
    from cluster.config import config_hash
    from cluster.results import io, schemas

    noop = cfg["noop"]
    if noop["started_dir"]:
        io.write_text(_node_id(), Path(noop["started_dir"]) / f"{noop['value']:g}")
    if noop["crash"]:
        marker = noop["crash_marker"]
        if marker is None or not Path(marker).exists():
            if marker is not None:
                Path(marker).touch()
            os._exit(13)  # like a segfault or the OOM killer: Ray sees a dead worker
    if noop["sleep"]:
        time.sleep(noop["sleep"])
    if noop["fail"]:
        raise ValueError(f"noop.fail is set (value {noop['value']})")
    chash = config_hash(cfg)
    meta = schemas.RunMeta(f"noop-{chash}", chash, cfg["run"]["seed"])
    return {"sweep_noop": schemas.SWEEP_NOOP.build({"value": noop["value"], "slept": noop["sleep"]}, meta)}


COMMANDS: dict[str, Command] = {
    "noc": Command("noc", "rdasim noc: one point is a config `rdasim noc` accepts", _noc_schema, _noc_job,
                   "noc_summary", lambda: _known_schema("noc_summary"), _noc_check),
    "run": Command("run", "rdasim run: one point is a config `rdasim run` accepts", _run_schema, _run_job,
                   "run_summary", lambda: _known_schema("run_summary"), _run_check),
    "system": Command("system", "rdasim run with a [system]: one point is a system of chips", _run_schema,
                      _system_job, "system_summary", lambda: _known_schema("system_summary"), _system_check),
    "noop": Command("noop", "echo the config back (tests, overhead benchmarks)", _noop_schema, _noop_job,
                    "sweep_noop", lambda: _known_schema("sweep_noop"), listed=False),
}
LISTED = tuple(name for name, command in COMMANDS.items() if command.listed)  # what an error offers a user


def get(name: str) -> Command:
    try:
        return COMMANDS[name]
    except KeyError:
        raise UserError(f"unknown sweep command {name!r}; known: {', '.join(LISTED)}") from None

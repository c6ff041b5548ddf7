"""What a sweep can run: a small registry of commands, each a config schema, a job and its result table.

A point of a sweep is one resolved config of its command; the command's job turns it
into a result record (cluster/results/record.py) whose tables the sweep stores, one of
them the point's result (the rows of the main dataset). ``noc`` is ``rdasim noc``; ``run``
is ``rdasim run`` (``system`` the same with a [system]): the jobs of cluster/jobs, each
imported only when used, so a noc sweep never pays for the chip model. ``noop`` echoes its
config and exists to test the sweep machinery and measure its overhead.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pyarrow as pa

from cluster.errors import UserError

if TYPE_CHECKING:
    from cluster.config import Table
    from cluster.jobs.job import Job
    from cluster.results.record import Result


@dataclass(frozen=True)
class Command:
    """One sweepable command. Functions are module-level so Ray ships them by reference."""

    name: str
    doc: str
    schema: Callable[[], Table]  # the command's config schema
    job: Callable[[dict], Result]  # resolved config -> its result (the tables a point stores)
    result: str  # name of the table whose rows are the point's result
    result_schema: Callable[[], pa.Schema | None]  # its Arrow schema, when known up front
    check: Callable[[dict], None] = lambda cfg: None  # what the job checks before it simulates (raises UserError)
    listed: bool = True  # offered to users (False: a command for tests and benchmarks)


def _known_schema(name: str) -> pa.Schema | None:
    from cluster.results import schemas

    return next((t.arrow for t in schemas.ALL_TABLES if t.name == name), None)


# ----------------------------------------------------------------------------- noc
def _noc_schema():
    from cluster.config.noc import NOC_SCHEMA

    return NOC_SCHEMA


def _noc_job(cfg: dict) -> Job:
    from cluster.jobs.noc import NocJob

    return NocJob(cfg)


# ----------------------------------------------------------------------------- run
def _run_schema():
    from cluster.config.run import RUN_SCHEMA

    return RUN_SCHEMA


def _chip_job(cfg: dict) -> Job:
    """What `rdasim run CONFIG` simulates for one chip."""
    if cfg["system"]["chips"]:
        raise UserError("a point with a [system] (system.chips >= 1) is a system of chips: use command = \"system\"")
    from cluster.jobs.chip import ChipJob

    return ChipJob(cfg)


def _system_job(cfg: dict) -> Job:
    """What `rdasim run CONFIG` simulates with a [system] (its plan mapped)."""
    if not cfg["system"]["chips"]:
        raise UserError("sweep command 'system' needs a [system] with system.chips >= 1 in every point; "
                        "use command = \"run\" for one chip")
    from cluster.jobs.system import SystemJob

    return SystemJob(cfg)


def _execute(make: Callable[[dict], Job], cfg: dict) -> Result:
    """A point of a command made of a job (cluster/jobs/job.py): its result, as the command makes it
    (quietly: a sweep shows its points' progress)."""
    from cluster.jobs.job import execute

    return execute(make(cfg), quiet=True)


def _check(make: Callable[[dict], Job], cfg: dict) -> None:
    """What that job checks before it simulates: its config across fields, its cut and epoch."""
    from cluster.jobs.job import check

    check(make(cfg))


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


def _noop_job(cfg: dict) -> Result:
    from cluster.config import config_hash
    from cluster.jobs.job import result
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
    table = schemas.SWEEP_NOOP.build({"value": noop["value"], "slept": noop["sleep"]}, meta)
    return result("noop", meta, cfg, "completed", "", {"value": noop["value"]}, {"sweep_noop": table})


COMMANDS: dict[str, Command] = {
    "noc": Command("noc", "rdasim noc: one point is a config `rdasim noc` accepts", _noc_schema,
                   partial(_execute, _noc_job), "noc_summary", lambda: _known_schema("noc_summary"),
                   partial(_check, _noc_job)),
    "run": Command("run", "rdasim run: one point is a config `rdasim run` accepts", _run_schema,
                   partial(_execute, _chip_job), "run_summary", lambda: _known_schema("run_summary"),
                   partial(_check, _chip_job)),
    "system": Command("system", "rdasim run with a [system]: one point is a system of chips", _run_schema,
                      partial(_execute, _system_job), "system_summary", lambda: _known_schema("system_summary"),
                      partial(_check, _system_job)),
    "noop": Command("noop", "echo the config back, for tests and overhead benchmarks", _noop_schema, _noop_job,
                    "sweep_noop", lambda: _known_schema("sweep_noop"), listed=False),
}
LISTED = tuple(name for name, command in COMMANDS.items() if command.listed)  # what an error offers a user


def known() -> str:
    """Every command a spec may name, the unlisted ones (noop) with what they are for: what an error lists."""
    return ", ".join(LISTED + tuple(f"{n} ({c.doc})" for n, c in COMMANDS.items() if not c.listed))


def get(name: str) -> Command:
    try:
        return COMMANDS[name]
    except KeyError:
        raise UserError(f"unknown sweep command {name!r}; known: {', '.join(LISTED)}") from None

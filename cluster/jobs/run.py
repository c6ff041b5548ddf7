"""Which job ``rdasim run`` (and ``rdasim.run``) makes of a resolved config: a system of chips
when its [system] has chips, else one chip."""

from __future__ import annotations

from cluster.errors import UserError
from cluster.jobs.job import Job


def run_job(cfg: dict, trace: bool = False, memory_map: int | None = None) -> Job:
    """The job of a resolved ``rdasim run`` config (checked as far as it can be without simulating);
    ``trace`` and ``memory_map`` apply to one chip's run (cluster/jobs/chip.py)."""
    if cfg["system"]["chips"]:
        from cluster.jobs.system import SystemJob

        if trace or memory_map is not None:  # asked for and silently not written before
            raise UserError("a trace and a memory map (--trace, --memory-map) record one chip's run; a [system] of "
                            "chips records neither")

        return SystemJob(cfg)
    from cluster.jobs.chip import ChipJob

    return ChipJob(cfg, trace, memory_map)

"""Which job ``rdasim run`` (and ``rdasim.run``) makes of a resolved config: a system of chips
when its [system] has chips, else one chip."""

from __future__ import annotations

from cluster.jobs.job import Job


def run_job(cfg: dict, trace: bool = False, memory_map: int | None = None) -> Job:
    """The job of a resolved ``rdasim run`` config (checked as far as it can be without simulating);
    ``trace`` and ``memory_map`` apply to one chip's run (cluster/jobs/chip.py)."""
    if cfg["system"]["chips"]:
        from cluster.jobs.system import SystemJob

        return SystemJob(cfg)
    from cluster.jobs.chip import ChipJob

    return ChipJob(cfg, trace, memory_map)

"""Backends run the same shards and the same epoch protocol: in-process, or as Ray actors."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.noc.shard import ShardReport

BACKENDS = ("local", "ray")


@dataclass
class Outcome:
    """What a backend hands back after a run."""

    reports: list[ShardReport]
    epochs: int
    end_cycle: int  # end of the last epoch
    saturated: bool
    wall_seconds: float
    sync_seconds: float  # time not spent advancing shards (exchange, waiting, RPC)
    in_transit_flits: int = 0  # flits sent across a cut but not yet delivered at the end
    extra: dict = field(default_factory=dict)


def run_backend(name: str, params, regions, epoch: int, address: str | None = None, progress=None) -> Outcome:
    if name == "local":
        from cluster.backends.local import run_local

        return run_local(params, regions, epoch, progress=progress)
    if name == "ray":
        from cluster.backends.ray_backend import run_ray

        return run_ray(params, regions, epoch, address=address, progress=progress)
    raise ValueError(f"unknown backend {name!r}")

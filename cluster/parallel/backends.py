"""The backends by name: each runs a ``ShardModel``'s shards and the same epoch protocol,
in this process (``local``) or as Ray actors (``ray``), with bit-identical results."""

from __future__ import annotations

from typing import Any

from cluster.parallel.local import run_local
from cluster.parallel.model import Backend, ProgressFn, RunOutcome, ShardModel
from cluster.parallel.ray_actors import run_ray

BACKENDS: dict[str, Backend] = {"local": run_local, "ray": run_ray}


def run_backend(name: str, model: ShardModel, regions: list[Any], epoch: int, address: str | None = None,
                progress: ProgressFn | None = None) -> RunOutcome:
    """Run ``model`` on ``regions`` with the backend called ``name``."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}: one of {', '.join(BACKENDS)}")
    return BACKENDS[name](model, regions, epoch, address, progress)

"""The backends by name: each runs a ``ShardModel``'s shards and the same epoch protocol,
in this process (``local``) or as Ray actors (``ray``), with bit-identical results."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from cluster.parallel.local import run_local
from cluster.parallel.model import Backend, ProgressFn, RunOutcome, ShardModel
from cluster.parallel.ray_actors import hosts_started, run_ray

BACKENDS: dict[str, Backend] = {"local": run_local, "ray": run_ray}
# what a backend starts before a run of a given shard count is planned, so that it starts
# while the driver pilots: Ray's shard actors (shards, address, modules to import) -> a block
PREPARE: dict[str, Callable[[int, str | None, tuple[str, ...]], AbstractContextManager[None]]] = {
    "ray": hosts_started}


def prepared(name: str, shards: int | str, address: str | None,
             preload: tuple[str, ...]) -> AbstractContextManager[None]:
    """The block to plan and run a run of ``shards`` on backend ``name`` in (nothing to start
    for one shard, for "auto", whose count the pilot decides, or for an in-process backend)."""
    if not isinstance(shards, int) or shards <= 1 or name not in PREPARE:
        return nullcontext()
    return PREPARE[name](shards, address, preload)


def run_backend(name: str, model: ShardModel, regions: list[Any], epoch: int, address: str | None = None,
                progress: ProgressFn | None = None) -> RunOutcome:
    """Run ``model`` on ``regions`` with the backend called ``name``."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}: one of {', '.join(BACKENDS)}")
    return BACKENDS[name](model, regions, epoch, address, progress)

"""Backends run the same shards and the same epoch protocol: in-process, or as Ray actors.

Both take a ``ShardModel`` (cluster/parallel/model.py); without one they run the
cycle-level NoC under synthetic traffic (``NocModel``), as ``rdasim noc`` always has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BACKENDS = ("local", "ray")


@dataclass
class RunOutcome:
    """What a backend hands back after a run."""

    reports: list  # one model report per shard (NocReport for the NoC)
    epochs: int
    end_cycle: int  # end of the last epoch
    saturated: bool  # the stop rule cut the run off at its horizon
    wall_seconds: float
    sync_seconds: float  # time not spent advancing shards (exchange, waiting, RPC)
    in_transit_flits: int = 0  # flits sent across a cut but not yet delivered at the end
    extra: dict = field(default_factory=dict)


def window_stats(windows) -> dict:
    """Mean and median window length (cycles per epoch) for the run's report."""
    import numpy as np

    w = np.asarray(windows, dtype=np.float64)
    if not len(w):
        return {"window_mean": 0.0, "window_median": 0.0}
    return {"window_mean": round(float(w.mean()), 2), "window_median": float(np.median(w))}


def noc_model(params, regions):
    from cluster.parallel.epochs import NocModel
    from cluster.parallel.regions import owner_map

    return NocModel(params, owner_map(regions, params.rows, params.cols))


def run_backend(name: str, params, regions, epoch: int, address: str | None = None, progress=None,
                model=None) -> RunOutcome:
    if name == "local":
        from cluster.parallel.local import run_local

        return run_local(params, regions, epoch, progress=progress, model=model)
    if name == "ray":
        from cluster.parallel.ray_actors import run_ray

        return run_ray(params, regions, epoch, address=address, progress=progress, model=model)
    raise ValueError(f"unknown backend {name!r}")

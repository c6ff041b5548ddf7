"""rdasim's Python API: the ``rdasim`` commands as functions for scripts and notebooks (docs/api.md).

    import rdasim
    r = rdasim.run("examples/race.toml", memory__reclaim="partial-free")
    r.status, r.summary["use_after_free"], r.tables["run_summary"].to_pandas()

Each function is the command of the same name, on the same code (cluster/): a config is a
TOML file's path, TOML text or a dict; keys are overridden by keyword (a flag's short name
such as ``shards=2``, or a key path with ``__`` for each dot, ``memory__policy="virtual"``)
or by a mapping of dotted paths (``{"memory.policy": "virtual"}``). A bad config raises
``ConfigError`` listing every problem with its key; other bad input ``UserError``. Nothing
here exits the interpreter, and progress goes to stderr (redrawn in place in a notebook)
unless ``progress=False``. ``backend="ray"`` joins the Ray this process already started,
else ``address`` (or ``$RAY_ADDRESS``), else an embedded local one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster.config.loader import ConfigError
from cluster.errors import UserError
from cluster.results.record import Result, Summary

if TYPE_CHECKING:
    import pyarrow as pa

    from cluster.explore.driver import ExploreSummary
    from cluster.sweep.runner import SweepSummary

__all__ = ["ConfigError", "Result", "Summary", "UserError", "compare", "explore", "map", "noc", "read", "run",
           "sweep"]

Spec = str | Path | Mapping[str, Any]  # a TOML file, TOML text or a dict
Config = Spec | None  # None: every key at its default


def run(config: Config = None, overrides: Mapping[str, Any] | None = None, /, *, progress: bool = True,
        trace: bool = False, memory_map: int | None = None, **keys: Any) -> Result:
    """``rdasim run``: a workload on one chip, or on a system of chips when [system] has chips.
    ``trace``: a Chrome trace in ``files["trace.json"]``; ``memory_map``: every MU's block map at
    that cycle in ``files["memory_map_<cycle>.txt"]`` (and ``.json``)."""
    from cluster.config import short
    from cluster.config.run import RUN_SCHEMA
    from cluster.config.source import load_config
    from cluster.jobs.job import execute
    from cluster.jobs.run import run_job

    cfg = load_config(RUN_SCHEMA, config, overrides, keys, short.CHIP)
    return execute(run_job(cfg, trace, memory_map), quiet=not progress)


def noc(config: Config = None, overrides: Mapping[str, Any] | None = None, /, *, progress: bool = True,
        **keys: Any) -> Result:
    """``rdasim noc``: the NoC under synthetic traffic, one simulation per offered load
    (``rates=[...]``; none given: BookSim2's reference curve)."""
    from cluster.config import short
    from cluster.config.noc import NOC_SCHEMA
    from cluster.config.source import load_config
    from cluster.jobs.noc import run_noc

    return run_noc(load_config(NOC_SCHEMA, config, overrides, keys, short.NOC), quiet=not progress)


def map(config: Config = None, overrides: Mapping[str, Any] | None = None, /, *, preset: str | None = None,  # noqa: A001
        progress: bool = True, **keys: Any) -> Result:
    """``rdasim map``: DFModel's mapping of a workload onto a system (``preset``: a published one, docs/mapping.md)."""
    from cluster.config import short
    from cluster.config.map import resolve
    from cluster.config.source import load_args
    from cluster.jobs.plan import map_config

    return map_config(resolve(preset=preset, **load_args(config, overrides, keys, short.MAP)), quiet=not progress)


def sweep(spec: Spec, out: str | Path = "results", *, address: str | None = None,
          max_concurrency: int | None = None, retry_failed: bool = False, in_process: bool = False,
          existing: str = "refuse", mix_code: bool = False, progress: bool = True) -> SweepSummary:
    """``rdasim sweep``: every point of ``spec`` not yet stored in ``out`` (docs/sweeps.md), on Ray
    (``in_process``: here, one by one); read the results with ``read(out, table)``. ``existing``:
    "add" or "replace" a sweep of the same name from another spec version."""
    from cluster.sweep.plan import plan_sweep
    from cluster.sweep.runner import run_sweep

    return run_sweep(plan_sweep(spec), out, address, max_concurrency, not progress, retry_failed, in_process,
                     existing, mix_code)


def explore(spec: Spec, out: str | Path = "results", *, budget: int | None = None, optimizer: str | None = None,
            seed: int | None = None, parallel: int | None = None, address: str | None = None,
            in_process: bool = False, replace: bool = False, progress: bool = True) -> ExploreSummary:
    """``rdasim explore``: a multi-objective search of ``spec``'s space (docs/explore.md) until
    ``budget`` trials are stored in ``out``; ``.front`` holds the Pareto front and its hypervolume."""
    from cluster.explore.driver import Options, run_explore
    from cluster.explore.spec import read_explore

    opts = Options(budget, optimizer, seed, parallel, address, in_process, replace, not progress)
    return run_explore(read_explore(spec), out, opts)


def read(out: str | Path, table: str, columns: list[str] | None = None, filter: Any = None) -> pa.Table:  # noqa: A002
    """One table (docs/reference.md#result-columns) across a results directory: a run's, a
    sweep's, an exploration's or a tree of them, as Arrow (``.to_pandas()``, ``polars.from_arrow``)."""
    from cluster.results.reading import read as read_results

    return read_results(out, table, columns, filter)


def compare(a: str | Path, b: str | Path | None = None, *, where_a: list[str] | None = None,
            where_b: list[str] | None = None, metrics: list[str] | None = None, out: str | Path | None = None):
    """``rdasim compare``: two runs or two sweep slices (``where_a=["memory.policy=virtual"]``; ``b`` None:
    both slices of ``a``'s sweep) metric by metric, each the mean of its completed runs, with the ratio
    B / A. ``.text()`` is what the command prints, ``.lines`` its rows; ``out``: the figure drawn there."""
    from cluster.report import compare as comparing

    result = comparing.compare(a, b, where_a=where_a, where_b=where_b, metrics=metrics)
    if out is not None:
        comparing.write(result, Path(out))
    return result

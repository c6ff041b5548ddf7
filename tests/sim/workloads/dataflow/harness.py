"""Helpers for mapped-execution tests: map a small graph on one chip, place it, run it."""

from __future__ import annotations

import dataclasses

from mapping.chips import RDA_PRESETS
from mapping.graph import Kernel, KernelKind, add_kernel, connect, new_graph
from mapping.kernel_costs import ExecutionModel
from mapping.placement import place_on_grid
from mapping.solver import map_workload
from mapping.systems import LinkKind, NetworkDim, Parallelism, System
from mapping.workload import Workload
from sim.workloads.dataflow import DataflowParams, plan_addresses
from tests.sim.chip.chiprun import config, run

EW, GG, GW = KernelKind.ELEMENTWISE, KernelKind.GEMM, KernelKind.GEMM_WEIGHT


def chain(kernels: list[Kernel], word: int = 2):
    g = new_graph("chain", word)
    for k in kernels:
        add_kernel(g, k)
    for a, b in zip(kernels, kernels[1:]):
        connect(g, a.name, b.name)
    return g


def plan_of(graph, tiled_extent: int, tile_size: int, chip: str = "plasticine", **model):
    spec = RDA_PRESETS[chip]
    w = Workload("test", graph, tiled_extent=tiled_extent, tile_size=tile_size)
    system = System(1, spec.dfmodel(), (NetworkDim(LinkKind.RING, 1, 1.0, Parallelism.TP),))
    plan = map_workload(w, system, ExecutionModel(**model), time_limit=20)
    assert plan.feasible, plan.reason
    return plan


def run_plan(plan, raw: dict | None = None, chip: str = "plasticine", passes: int = 1, **flags):
    """(summary, tables, outcome, results) of a plan run on the full chip preset."""
    raw = dict(raw or {})
    raw.setdefault("chip", {"preset": chip})
    cfg = config(raw)
    spec = cfg.spec
    placement = plan_addresses(place_on_grid(plan, spec, 0, cfg.policy.room(cfg.mu)), spec.mu_bytes)
    params = DataflowParams.from_plan(plan, placement, spec, passes)
    cfg = dataclasses.replace(cfg, workload=params)
    from cluster.jobs.chip import simulate_chip

    return simulate_chip(cfg, **flags)


__all__ = ["EW", "GG", "GW", "Kernel", "chain", "plan_of", "run", "run_plan"]

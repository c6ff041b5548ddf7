"""A mapping problem from a plain nested dict (numbers already in bytes, bytes/s, Hz, s).

The same shape as the ``rdasim map`` config file after unit normalisation, and the
form the presets are written in, so a preset and a config describe problems alike.
"""

from __future__ import annotations

import inspect
import json
import math
from dataclasses import replace
from pathlib import Path

from mapping.generators.registry import GENERATORS
from mapping.kernel_costs import ExecutionModel
from mapping.plan import MappingPlan
from mapping.solver import MappingProblem, map_workload
from mapping.systems import LinkKind, NetworkDim, Parallelism, Prices, System, chip
from mapping.workload import Workload

WORKLOAD_KINDS = GENERATORS.names()
CHIP_FIELDS = {"cores": "cores", "width": "width", "height": "height", "frequency": "frequency",
               "sram": "sram_bytes", "dram_bandwidth": "dram_bandwidth", "dram_capacity": "dram_bytes"}
# a generator's keys where a spec's 0 (or None) means "let the mapper choose" (or the generator: ffn = 4h)
FREE_KEYS = frozenset({"micro_batch", "tile_size", "ffn", "expert_ffn", "k"})


def _free(value):
    """0 (or None) in a spec means 'let the mapper choose'."""
    return value or None


def build_workload(spec: dict) -> Workload:
    """The workload ``spec["kind"]``'s generator makes from the spec's table of that kind (as
    keyword arguments), ``word`` and ``name``."""
    kind = spec["kind"]
    try:
        generate = GENERATORS.get(kind)
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    args = {k: _free(v) if k in FREE_KEYS else v for k, v in spec.get(kind, {}).items()}
    args.update(word=int(spec.get("word", 2)), name=spec.get("name") or kind)
    try:
        inspect.signature(generate).bind(**args)
    except TypeError as exc:
        raise ValueError(f"workload.{kind}: {exc}") from None
    return generate(**args)


def build_system(spec: dict) -> System:
    base = chip(spec["chip"])
    overrides = {CHIP_FIELDS[k]: v for k, v in spec.get("chip_overrides", {}).items() if v}
    if overrides.get("dram_bytes") is not None and overrides["dram_bytes"] < 0:
        overrides["dram_bytes"] = math.inf  # negative: unlimited
    the_chip = replace(base, name=spec.get("chip_name") or base.name, **overrides)
    network = tuple(NetworkDim(LinkKind(d["kind"]), int(d.get("size", 0)), float(d["link_bandwidth"]),
                               Parallelism(d.get("parallelism", "DP")), float(d.get("link_latency") or 500e-9))
                    for d in spec["network"])
    prices = dict(spec.get("prices", {}))
    prices["link_power"] = tuple(prices.get("link_power", ()))
    return System(int(spec["chips"]), the_chip, network, Prices(**prices))


def build_model(spec: dict) -> ExecutionModel:
    return ExecutionModel(
        kernel_by_kernel=spec.get("execution", "dataflow") == "kernel-by-kernel",
        partitions=_free(spec.get("partitions")), overlap=spec.get("overlap", True),
        detailed_compute=spec.get("compute", "roofline") == "detailed",
        utilization=spec.get("utilization", 0.9), stream_weights=spec.get("stream_weights", True),
        all_reduce_passes=spec.get("all_reduce_passes", 1), sram_limit=spec.get("sram_limit", True),
        weights_off_chip=bool(spec.get("weights_off_chip", False)),
    )


def problem_from_spec(spec: dict) -> MappingProblem:
    mapping = spec.get("mapping", {})
    return MappingProblem(build_workload(spec["workload"]), build_system(spec["system"]), build_model(mapping),
                          float(mapping.get("time_limit", 60.0)), float(mapping.get("gap", 1e-3)))


def read_plan_file(path: str) -> tuple[MappingPlan, dict]:
    """The plan in a plan.json (`rdasim map --out DIR`) and the file's whole content (ValueError if absent)."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"plan file {str(file)!r} does not exist (write one with `rdasim map ... --out DIR`)")
    data = json.loads(file.read_text())
    return MappingPlan.from_dict(data["plan"] if "plan" in data else data), data


def map_graph_keys(section: str, graph: dict, mapping: dict, system: System) -> MappingPlan:
    """Map a run's graph keys (``workload.SECTION.graph``) onto ``system`` with its mapping options."""
    if not graph.get("kind"):
        raise ValueError(f"give workload.{section}.plan (a plan.json) or the graph keys "
                         f"(workload.{section}.graph.kind, ...)")
    return map_workload(build_workload({k: v for k, v in graph.items() if v is not None}), system,
                        build_model(mapping), float(mapping.get("time_limit") or 60.0),
                        float(mapping.get("gap") or 1e-3))

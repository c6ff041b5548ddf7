"""A mapping problem from a plain nested dict (numbers already in bytes, bytes/s, Hz, s).

The same shape as the ``rdasim map`` config file after unit normalisation, and the
form the presets are written in, so a preset and a config describe problems alike.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

from mapping import generators as gen
from mapping.graph import load_graph
from mapping.kernel_costs import ExecutionModel
from mapping.plan import MappingPlan
from mapping.solver import MappingProblem, map_workload
from mapping.systems import LinkKind, NetworkDim, Parallelism, Prices, System, chip
from mapping.workload import Scheme, Workload

WORKLOAD_KINDS = ("llm", "decode", "moe", "dlrm", "hpl", "fft", "graph")
CHIP_FIELDS = {"cores": "cores", "width": "width", "height": "height", "frequency": "frequency",
               "sram": "sram_bytes", "dram_bandwidth": "dram_bandwidth", "dram_capacity": "dram_bytes"}


def _free(value):
    """0 (or None) in a spec means 'let the mapper choose'."""
    return value or None


def build_workload(spec: dict) -> Workload:
    kind = spec["kind"]
    p = dict(spec.get(kind, {}))
    word = int(spec.get("word", 2))
    name = spec.get("name") or kind
    if kind == "llm":
        return gen.llm_workload(p["hidden"], p["heads"], p["seq"], p["layers"], p["global_batch"],
                                _free(p.get("micro_batch", 1)), word, p.get("training", False),
                                p.get("layers_in_graph", 1), _free(p.get("tile_size")), _free(p.get("ffn")), name)
    if kind == "decode":
        return gen.decode_workload(p["hidden"], p["heads"], p["context"], p["batch"], p["layers"], word,
                                   _free(p.get("ffn")), p.get("steps", 1), _free(p.get("tile_size")), name)
    if kind == "moe":
        return gen.moe_workload(p["hidden"], p["heads"], p["seq"], p["experts"], p["top_k"], p["layers"],
                                p["global_batch"], p.get("capacity_factor", 1.0), _free(p.get("expert_ffn")),
                                _free(p.get("micro_batch", 1)), word, _free(p.get("tile_size")), name)
    if kind == "dlrm":
        return gen.dlrm_workload(p["mlp_dim"], p["bottom_mlps"], p["top_mlps"], p["tables"], p["pooled_rows"],
                                 p["emb_dim"], p["rows"], p["micro_batch"], p["global_batch"], word,
                                 p.get("copies", 1), name)
    if kind == "hpl":
        return gen.hpl_workload(p["n"], p["block"], p["iterations"], word, p.get("copies", 1), name)
    if kind == "fft":
        return gen.fft_workload(p["length"], p["radix"], word, p.get("copies", 1), _free(p.get("k")), name)
    if kind == "graph":
        return Workload(name=name, graph=load_graph(p["path"]), scheme=Scheme(p.get("scheme", "tensor_parallel")),
                        layers=p.get("layers", 1), global_batch=p.get("global_batch", 1),
                        micro_batch=_free(p.get("micro_batch", 1)), tiled_extent=p.get("tiled_extent", 1),
                        tile_size=_free(p.get("tile_size")), copies=p.get("copies", 1))
    raise ValueError(f"unknown workload kind {kind!r}; known: {', '.join(WORKLOAD_KINDS)}")


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

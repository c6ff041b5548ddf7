"""Config for ``rdasim map``: the TOML schema, preset merging, and conversion to mapping inputs.

A config may start from a published preset (``preset = "gpt3-1t-sn30"``) and override
any key; ``--set key=value`` overrides both. After unit normalisation the resolved
config has the plain shape of mapping.specs, which builds the MappingProblem.
"""

from __future__ import annotations

import copy
from typing import Any

from cluster.config import REQUIRED, Field, Table, TableList, load
from cluster.config.schema import spell_units
from cluster.errors import UserError
from mapping.models import MODELS
from mapping.presets import SPECS, preset_spec
from mapping.solver import MappingProblem
from mapping.specs import WORKLOAD_KINDS, problem_from_spec
from mapping.systems import CHIPS


def _i(doc, default=REQUIRED, lo=1):
    return Field("int", default, doc, min=lo)


LLM = Table({
    "hidden": _i("hidden size h"), "heads": _i("attention heads"), "seq": _i("sequence length s (tiled)"),
    "layers": _i("layers of the model"), "global_batch": _i("sequences per batch"),
    "micro_batch": _i("sequences per micro-batch; 0 = enumerate", 1, 0),
    "training": Field("bool", False, "forward + backward + weight updates (41 kernels) instead of forward (18)"),
    "layers_in_graph": _i("layers chained in the graph (forward only)", 1),
    "tile_size": _i("sequence tile; 0 = enumerate", 0, 0), "ffn": _i("FFN width; 0 = 4h", 0, 0),
})
DECODE = Table({
    "hidden": _i("hidden size"), "heads": _i("attention heads"), "context": _i("tokens already in the KV cache"),
    "batch": _i("sequences decoded together (tiled)"), "layers": _i("layers"),
    "ffn": _i("FFN width; 0 = 4h", 0, 0), "steps": _i("decode steps per reported batch", 1),
    "tile_size": _i("batch tile; 0 = enumerate", 0, 0),
})
MOE = Table({
    "hidden": _i("hidden size"), "heads": _i("attention heads"), "seq": _i("sequence length (tiled)"),
    "experts": _i("experts E"), "top_k": _i("experts per token"), "layers": _i("layers"),
    "global_batch": _i("sequences per batch"), "capacity_factor": Field("float", 1.0, "expert slot padding", min=0.01),
    "expert_ffn": _i("expert FFN width; 0 = 4h", 0, 0), "micro_batch": _i("0 = enumerate", 1, 0),
    "tile_size": _i("0 = enumerate", 0, 0),
})
SERVE_STEP = Table({
    "model": Field("choice", "llama-3.1-8b", "a model of mapping/models.py (its published configuration)",
                   choices=tuple(MODELS)),
    "tokens": _i("tokens the step processes (tiled): one a decode sequence, a prefill chunk's"),
    "keys": _i("query-key pairs per head over the step's tokens (0: each token attends to itself)", 0, 0),
    "kv_read": _i("cached tokens whose K and V the step reads, per layer", 0, 0),
    "tile_size": _i("tokens a tile; 0 = enumerate", 0, 0), "layers": _i("layers; 0 = the model's", 0, 0),
})
DLRM = Table({
    "mlp_dim": _i("MLP width"), "bottom_mlps": _i("bottom MLPs"), "top_mlps": _i("top MLPs", REQUIRED, 0),
    "tables": _i("embedding tables"), "pooled_rows": _i("rows pooled per lookup"), "emb_dim": _i("embedding width"),
    "rows": _i("rows per table"), "micro_batch": _i("samples per graph pass"),
    "global_batch": _i("samples per batch"), "copies": _i("independent copies", 1),
})
HPL = Table({"n": _i("matrix side"), "block": _i("panel width B"), "iterations": _i("panel steps modelled"),
             "copies": _i("independent copies", 1)})
FFT = Table({"length": _i("FFT length"), "radix": _i("radix", REQUIRED, 2), "k": _i("K per pass; 0 = derived", 0, 0),
             "copies": _i("independent copies", 1)})
GRAPH = Table({
    "path": Field("str", REQUIRED, "graph JSON written by mapping.graph.save_graph"),
    "scheme": Field("choice", "tensor_parallel", "how chips share work",
                    choices=("tensor_parallel", "data_parallel", "fft", "hpl")),
    "layers": _i("graph repetitions", 1), "global_batch": _i("graph passes per batch", 1),
    "micro_batch": _i("0 = enumerate", 1, 0), "tiled_extent": _i("length of the tiled dimension", 1),
    "tile_size": _i("0 = enumerate", 0, 0), "copies": _i("independent copies", 1),
})

SCHEMA = Table({
    "preset": Field("choice", "", "start from a published preset", choices=("",) + tuple(SPECS)),
    "workload": Table({
        "kind": Field("choice", "llm", "workload generator", choices=WORKLOAD_KINDS),
        "name": Field("str", "", "label in results"),
        "word": _i("bytes per element", 2),
        "llm": LLM, "decode": DECODE, "moe": MOE, "dlrm": DLRM, "hpl": HPL, "fft": FFT, "graph": GRAPH,
        "serve-step": SERVE_STEP,
    }),
    "system": Table({
        "chips": _i("number of chips"),
        "chip": Field("choice", "SN30", "chip preset", choices=tuple(CHIPS)),
        "chip_name": Field("str", "", "label when overriding the chip"),
        "chip_overrides": Table({
            "cores": _i("compute units; 0 = keep", 0, 0), "width": _i("systolic width; 0 = keep", 0, 0),
            "height": _i("systolic height; 0 = keep", 0, 0),
            "frequency": Field("frequency", 0, "clock; 0 = keep", min=0),
            "sram": Field("size", 0, "on-chip SRAM; 0 = keep"),
            "dram_bandwidth": Field("bandwidth", 0, "DRAM bandwidth; 0 = keep", min=0),
            "dram_capacity": Field("float", 0, "DRAM bytes; 0 = keep, -1 = unlimited", min=-1),
        }),
        "network": TableList(Table({
            "kind": Field("choice", "r", "r (ring), sw (switch) or fc (fully connected)", choices=("r", "sw", "fc")),
            "size": _i("chips along this dimension; 0 = enumerate", 0, 0),
            "link_bandwidth": Field("bandwidth", REQUIRED, "per-link bandwidth", min=1),
            "link_latency": Field("time", 500e-9,
                                  "per-link latency (the mapper ignores it; a simulated system does not)", min=1e-12),
            "parallelism": Field("choice", "DP", "what the dimension carries", choices=("TP", "PP", "DP")),
        }), "1 to 3 network dimensions"),
        "prices": Table({
            "chip": Field("float", 0.0, "$ per chip", min=0), "link": Field("float", 0.0, "$ per GB/s of link", min=0),
            "switch": Field("float", 0.0, "$ per GB/s per switch port", min=0),
            "dram": Field("float", 0.0, "$ per GB/s of DRAM", min=0),
            "chip_power": Field("float", 0.0, "W per chip", min=0),
            "link_power": Field("list", [], "J/GB per dimension", item=Field("float", min=0)),
            "switch_power": Field("float", 0.0, "J/GB", min=0), "dram_power": Field("float", 0.0, "J/GB", min=0),
        }),
    }),
    "mapping": Table({
        "execution": Field("choice", "dataflow", "partitions of several kernels, or one kernel each",
                           choices=("dataflow", "kernel-by-kernel")),
        "partitions": _i("partitions per chip; 0 = one per kernel", 0, 0),
        "overlap": Field("bool", True, "partition time = max(compute, memory, network), else the sum"),
        "compute": Field("choice", "roofline", "compute model", choices=("roofline", "detailed")),
        "utilization": Field("float", 0.9, "roofline efficiency", min=0.01, max=1.0),
        "stream_weights": Field("bool", True, "a kernel alone in a partition may slice its weight (DFModel)"),
        "sram_limit": Field("bool", True, "enforce SRAM capacity (DFModel skips it for HPL and FFT)"),
        "all_reduce_passes": _i("1 = latest DFModel formula; 2 = reduce-scatter + all-gather", 1),
        "time_limit": Field("time", 60.0, "solver budget for the whole search", min=0.1),
        "gap": Field("float", 1e-3, "relative optimality gap accepted", min=0, max=1),
    }),
})


def _merge(base: dict, top: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in top.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


# workload kinds whose tensor-parallel group splits the hidden dimension: (batch key, layers key)
_SPLIT = {"llm": "global_batch", "moe": "global_batch", "decode": "batch"}


def split_limit(cfg: dict) -> tuple[str, int] | None:
    """(key, size) of the dimension a TP group splits, for the generators that have one."""
    kind = cfg["workload"]["kind"]
    if kind not in _SPLIT or not cfg["workload"].get(kind):
        return None
    return f"workload.{kind}.hidden", cfg["workload"][kind]["hidden"]


def tp_problem(cfg: dict, tp: int) -> str | None:
    """Why a mapping with tensor-parallel group ``tp`` is not physical (more chips than columns), or None."""
    limit = split_limit(cfg)
    if limit is None or tp <= limit[1]:
        return None
    key, hidden = limit
    return (f"TP = {tp:,} splits {key} = {hidden:,} into fractions of a column: the model's even split does "
            "not hold there; use fewer system.chips or more data parallelism")


def _too_many_chips(cfg: dict) -> str | None:
    limit = split_limit(cfg)
    if limit is None:
        return None
    kind = cfg["workload"]["kind"]
    w = cfg["workload"][kind]
    batch = w[_SPLIT[kind]]
    most = limit[1] * w["layers"] * batch  # TP <= hidden, PP <= layers, DP <= batch
    chips = cfg["system"]["chips"]
    if chips <= most:
        return None
    return (f"system.chips = {chips:,} is more than this workload can use: at most {most:,} "
            f"(TP <= {limit[0]} = {limit[1]:,}, PP <= layers = {w['layers']:,}, DP <= {_SPLIT[kind]} = {batch:,})")


def _checks(cfg: dict) -> list[str]:
    out = []
    net = cfg["system"]["network"]
    if not 1 <= len(net) <= 3:
        out.append(f"system.network: needs 1 to 3 [[system.network]] dimensions, got {len(net)}")
    kind = cfg["workload"]["kind"]
    if kind != "graph" and not cfg["workload"][kind]:
        out.append(f"workload.{kind}: section missing for workload kind {kind!r}")
    elif (why := _too_many_chips(cfg)) is not None:
        out.append(why)
    return out


def resolve(path: str | None = None, overrides: list[str] | None = None, preset: str | None = None,
            extra: list[tuple[str, object]] | None = None, raw: dict | None = None, **given: Any) -> dict:
    """The validated config: preset, then file (or ``raw``), then ``--set`` overrides, then ``extra``
    (``given``: how errors name the config and the overrides, cluster/config/loader.py ``load``)."""
    from cluster.config.loader import parse_override, read_toml

    raw = read_toml(path) if path else copy.deepcopy(raw or {})
    pairs = [parse_override(o) for o in overrides or []] + list(extra or [])
    name = preset or raw.get("preset") or next((v for k, v in pairs if k == "preset"), "")
    if name:
        if name not in SPECS:
            raise UserError(f"unknown preset {name!r}; known: {', '.join(SPECS)}")
        raw = _merge(spell_units(preset_spec(name), SCHEMA), raw)  # the preset's numbers are in base units
        raw["preset"] = name
    given_kind = [v for k, v in pairs if k == "workload.kind"]  # the last giver wins, as in load
    kind = str(given_kind[-1] if given_kind else raw.get("workload", {}).get("kind", "llm"))
    given.setdefault("source", str(path) if path else None)
    # only the chosen workload section is required: fill the others with placeholders the schema ignores
    cfg = load(_schema_for(kind), raw=raw, overrides=overrides, extra=extra, **given)
    problems = _checks(cfg)
    if problems:
        raise UserError("config: " + problems[0], problems[1:])
    return cfg


def _schema_for(kind: str) -> Table:
    """The schema with only workload.<kind> keeping its required keys."""
    workload = SCHEMA.fields["workload"]

    def optional(table: Table) -> Table:
        return Table({name: Field(f.kind, None, f.doc, f.choices, f.min, f.max, f.item) if f.required else f
                      for name, f in table.fields.items()}, table.doc)

    fields = {name: optional(t) if name in WORKLOAD_KINDS and name != kind else t
              for name, t in workload.fields.items()}
    return Table(dict(SCHEMA.fields, workload=Table(fields, workload.doc)), SCHEMA.doc)


def to_problem(cfg: dict) -> MappingProblem:
    """Resolved config -> MappingProblem (the spec is the config minus unused sections)."""
    spec = copy.deepcopy(cfg)
    kind = spec["workload"]["kind"]
    spec["workload"] = {k: v for k, v in spec["workload"].items() if k in ("kind", "name", "word", kind)}
    spec["workload"]["name"] = spec["workload"]["name"] or cfg.get("preset") or kind
    try:
        return problem_from_spec(spec)
    except (ValueError, KeyError, OSError) as exc:
        raise UserError(f"config: {exc}") from None

"""Config of ``rdasim run``: the TOML schema and its translation to a ChipConfig.

Sections: [chip] (a preset plus overrides), [noc] (fidelity, router timing, message
sizing), [memory] (policy, reclamation protocol, out-of-memory behaviour, placement),
[workload] (kind plus one table per kind) and [run] (the shared RUN_SECTION plus
run length and sampling). Cross-checks that need the resolved chip (a race unit on
the wrong kind of tile, a batch larger than the CUs) are reported with their key path
like any other config error.
"""

from __future__ import annotations

import math
from dataclasses import replace

from cluster.config import Field, Table
from cluster.config.loader import ConfigError
from cluster.config.schema import Issue
from cluster.footprint import chip_issues as footprint_issues
from cluster.noc_config import RUN_SECTION
from sim.chip.config import NETWORKS, OOM_BEHAVIOURS, PLACEMENTS, PROTOCOLS, ChipConfig, ReclaimParams, noc_params_for
from sim.chip.messages import Sizing
from sim.chip.spec import CU, MU, PRESETS, unit_layout
from sim.memory.policies import POLICIES, PolicyParams
from sim.memory import weights
from sim.memory.weights import SPLITS, UNSPLITTABLE
from sim.workloads import KINDS
from sim.workloads.base import DISTS, Dist
from sim.workloads.kv_decode import KvParams
from sim.workloads.moe import MoeParams
from sim.workloads.race import RaceParams


def _i(doc, default, lo=0, unit=""):
    return Field("int", default, doc, min=lo, unit=unit)


CHIP = Table({
    "preset": Field("choice", "plasticine", "chip to start from", choices=tuple(PRESETS)),
    "rows": _i("tile rows (preset if unset)", None, 1),
    "cols": _i("tile columns (preset if unset)", None, 2),
    "clock": Field("frequency", None, "clock frequency, e.g. \"1GHz\" (preset if unset)", min=1),
    "flit_bits": _i("bits per flit", None, 64, "bits"),
    "vcs": Field("int", None, "virtual channels per port", min=1, max=16),
    "vc_buffers": _i("flit buffers per virtual channel", None, 1),
    "cu_lanes": _i("SIMD lanes per CU", None, 1),
    "cu_stages": _i("pipeline stages per CU", None, 1),
    "mu_bytes": Field("size", None, "scratchpad per MU, e.g. \"256KiB\"", min=64),
    "mu_banks": _i("SRAM banks per MU (one word each per cycle)", None, 1),
    "mu_word_bytes": _i("bytes per bank word", None, 1, "bytes"),
    "mu_access_latency": _i("cycles from service start to first word", None, 0, "cycles"),
    "translation_latency": _i("block-table lookup per access (virtual policy)", None, 0, "cycles"),
    "dram_bytes_per_cycle": _i("bandwidth of each DRAM interface unit", None, 1, "bytes/cycle"),
    "dram_latency": _i("DRAM access latency", None, 0, "cycles"),
}, doc="the grid of tiles: a preset and any overrides")

NOC = Table({
    "model": Field("choice", "packet", "cycle: VC routers, flit by flit; packet: link reservations (fast)",
                   choices=NETWORKS),
    "routing_delay": _i("route computation delay", 0, 0, "cycles"),
    "vc_alloc_delay": _i("VC allocation delay", 1, 1, "cycles"),
    "sw_alloc_delay": _i("switch allocation delay", 1, 1, "cycles"),
    "st_delay": _i("switch traversal delay", 1, 1, "cycles"),
    "link_latency": _i("link latency", 1, 1, "cycles"),
    "credit_delay": _i("credit processing delay", 1, 0, "cycles"),
    "header_bits": _i("header bits per packet", 64, 1, "bits"),
    "max_packet_bytes": Field("size", 2048, "largest data payload of one packet; longer messages are cut", min=1),
    "jitter": _i("extra random 0..jitter cycles before each message enters the network", 0, 0, "cycles"),
}, doc="network fidelity, router timing and message sizing")


def _memory_checks(mem: dict) -> list[tuple[str, str]]:
    out = []
    if mem.get("block_bytes") and mem["block_bytes"] % 64:
        out.append(("block_bytes", f"{mem['block_bytes']} is not a multiple of 64 bytes (one SRAM row)"))
    return out


MEMORY = Table({
    "policy": Field("choice", "virtual", "how an MU holds buffers", choices=POLICIES),
    "reclaim": Field("choice", "refcount-gated", "how shared references are reclaimed", choices=PROTOCOLS),
    "block_bytes": Field("size", 4096, "virtual: block size", min=64),
    "block_table_entries": _i("virtual: block-table entries per MU (0: one per block)", 0, 0),
    "static_buffer_bytes": Field("size", 0, "static-*: buffer size (0: the MU, or MU / buffers_per_mu)", min=0),
    "buffers_per_mu": _i("static-multi: buffers per MU when static_buffer_bytes is 0", 4, 1),
    "initial_bytes": Field("size", 4096, "realloc-copy: first reservation (at least the initial size)", min=64),
    "growth": Field("float", 2.0, "realloc-copy: growth factor", min=1.01),
    "weight_bits": Field("int", 8, "partial-free: bits of a reference's weight", min=1, max=62),
    "split": Field("choice", "halve", "partial-free: a copy takes half, one unit, or half of a power of two "
                   "(log2: weights stored as exponents)", choices=SPLITS),
    "on_unsplittable": Field("choice", "borrow", "partial-free: a holder with weight 1 borrows from the MU",
                             choices=UNSPLITTABLE),
    "on_oom": Field("choice", "stall", "when memory runs out: stall and retry, evict to DRAM, or fail",
                    choices=OOM_BEHAVIOURS),
    "placement": Field("choice", "spread", "which MU a new buffer goes to", choices=PLACEMENTS),
    "buffer_id_bits": _i("bits of a buffer id (ids wrap and are reused)", 16, 1, "bits"),
    "offset_bits": _i("bits of a virtual block + offset in a reference", 16, 1, "bits"),
}, doc="MU memory policy, reclamation protocol, out-of-memory behaviour", checks=[_memory_checks])

DIST = Table({
    "dist": Field("choice", "uniform", "fixed (mean), uniform [min, max], lognormal (median mean)", choices=DISTS),
    "mean": _i("fixed value or lognormal median", 64, 1),
    "min": _i("smallest value", 16, 1),
    "max": _i("largest value", 128, 1),
    "sigma": Field("float", 0.5, "lognormal shape", min=0.0),
}, doc="a distribution of token counts")


def _dist(default: Dist) -> Table:
    fields = dict(DIST.fields)
    fields["dist"] = replace(fields["dist"], default=default.kind)
    fields["mean"] = replace(fields["mean"], default=default.mean)
    fields["min"] = replace(fields["min"], default=default.lo)
    fields["max"] = replace(fields["max"], default=default.hi)
    return Table(fields, doc=DIST.doc)


_KV = KvParams()
DECODE = Table({
    "requests": _i("sequences to serve", _KV.requests, 1),
    "max_batch": _i("sequences running at once (one worker CU each)", _KV.max_batch, 1),
    "layers": _i("layers", _KV.layers, 1),
    "heads": _i("KV heads per layer", _KV.heads, 1),
    "head_dim": _i("head dimension", _KV.head_dim, 1),
    "dtype_bytes": _i("bytes per element", _KV.dtype_bytes, 1, "bytes"),
    "prompt_tokens": _dist(_KV.prompt),
    "output_tokens": _dist(_KV.output),
    "arrival_interval": _i("mean cycles between arrivals (exponential); 0: all at once", 0, 0, "cycles"),
    "scheduler_tile": Field("list", [0, 0], "[row, col] of the scheduler CU", item=Field("int", min=0)),
    "draft": _i("spec-decode: draft tokens per step", _KV.draft, 1),
    "accept": Field("float", _KV.accept, "spec-decode: acceptance probability of each draft token", min=0.0, max=1.0),
}, doc="kv-decode and spec-decode")

_MOE = MoeParams()
MOE = Table({
    "steps": _i("routing steps", _MOE.steps, 1),
    "tokens": _i("tokens per step", _MOE.tokens, 1),
    "experts": _i("experts E", _MOE.experts, 1),
    "top_k": _i("experts per token", _MOE.top_k, 1),
    "skew": Field("float", _MOE.skew, "Zipf exponent of expert popularity (0: uniform)", min=0.0),
    "hidden": _i("hidden size", _MOE.hidden, 1),
    "expert_ffn": _i("expert FFN width", _MOE.expert_ffn, 1),
    "dtype_bytes": _i("bytes per element", _MOE.dtype_bytes, 1, "bytes"),
    "producers": _i("token-producing CUs (the gate)", _MOE.producers, 1),
    "expert_cus": _i("CUs each expert's FFN is spread over (divides its compute time)", _MOE.expert_cus, 1),
    "scheduler_tile": Field("list", [0, 0], "[row, col] of the scheduler CU", item=Field("int", min=0)),
}, doc="moe")

_RACE = RaceParams()
_tile = Field("list", None, "[row, col]", item=Field("int", min=0))
RACE = Table({
    "trials": _i("repetitions of the scenario", _RACE.trials, 1),
    "producer": replace(_tile, default=list(_RACE.producer), doc="[row, col] of the producer CU"),
    "consumer": replace(_tile, default=list(_RACE.consumer), doc="[row, col] of the consumer CU"),
    "memory": replace(_tile, default=list(_RACE.memory), doc="[row, col] of the MU holding the buffer"),
    "jammers": Field("list", [list(j) for j in _RACE.jammers], "[row, col] of each MU streaming into the MU",
                     item=Field("list", item=Field("int", min=0))),
    "jam_bytes": Field("size", _RACE.jam_bytes, "bytes each jammer streams per trial", min=0),
    "lead_cycles": _i("cycles between starting the jam and copying the reference", _RACE.lead_cycles, 0, "cycles"),
    "hold_cycles": _i("cycles the producer holds its reference before using it", _RACE.hold_cycles, 0, "cycles"),
    "gap_cycles": _i("idle cycles between trials", _RACE.gap_cycles, 0, "cycles"),
    "data_bytes": Field("size", _RACE.data_bytes, "size of the shared buffer", min=1),
}, doc="race")

WORKLOAD = Table({
    "kind": Field("choice", "kv-decode", "what the CUs run", choices=KINDS),
    "decode": DECODE,
    "moe": MOE,
    "race": RACE,
}, doc="the workload")

RUN = Table({
    **RUN_SECTION.fields,
    "max_cycles": _i("simulated cycles after which the run is cut off", 20_000_000, 1, "cycles"),
    "sample_cycles": _i("period of the per-MU time series (raised to keep at most 2,000 samples)", 1000, 1,
                        "cycles"),
    "trace_limit": _i("trace events kept per shard (--trace)", 200_000, 1),
}, doc=RUN_SECTION.doc, checks=RUN_SECTION.checks)

RUN_SCHEMA = Table({"chip": CHIP, "noc": NOC, "memory": MEMORY, "workload": WORKLOAD, "run": RUN})

_CHIP_KEYS = {"clock": "clock_hz"}


def chip_config(cfg: dict, trace: bool = False, memory_map: int = -1) -> ChipConfig:
    """The ChipConfig a resolved ``rdasim run`` config describes (raises ConfigError)."""
    chip, noc, mem, wl, run = cfg["chip"], cfg["noc"], cfg["memory"], cfg["workload"], cfg["run"]
    issues: list[Issue] = []
    over = {_CHIP_KEYS.get(k, k): v for k, v in chip.items() if k != "preset" and v is not None}
    spec = PRESETS[chip["preset"]].with_(**over)
    issues += [Issue("chip", p) for p in spec.problems()]
    issues += footprint_issues(spec, mem, noc, run)  # before unit_layout allocates anything
    if issues:
        raise ConfigError("config", issues)
    lay = unit_layout(spec)
    timing = {k: noc[k] for k in ("routing_delay", "vc_alloc_delay", "sw_alloc_delay", "st_delay", "link_latency",
                                  "credit_delay")}
    sizing = Sizing(flit_bits=spec.flit_bits, header_bits=noc["header_bits"], max_packet_bytes=noc["max_packet_bytes"],
                    mu_id_bits=max(1, math.ceil(math.log2(max(2, len(lay.mus))))),
                    buffer_id_bits=mem["buffer_id_bits"], offset_bits=mem["offset_bits"],
                    weight_bits=mem["weight_bits"] if mem["reclaim"] == "partial-free" else 0)
    policy = PolicyParams(policy=mem["policy"], capacity=spec.mu_bytes, block_bytes=mem["block_bytes"],
                          table_entries=mem["block_table_entries"], static_buffer_bytes=mem["static_buffer_bytes"],
                          buffers_per_mu=mem["buffers_per_mu"], initial_bytes=mem["initial_bytes"],
                          growth=mem["growth"], word_bytes=spec.mu_word_bytes, mu_id_bits=sizing.mu_id_bits,
                          buffer_id_bits=mem["buffer_id_bits"], virtual_bits=mem["offset_bits"])
    if mem["policy"] == "virtual":
        try:
            policy.layout()
        except ValueError as exc:
            issues.append(Issue("memory.block_bytes", f"{mem['block_bytes']}: {exc}"))
    if mem["reclaim"] == "partial-free":
        why = weights.weight_problem(mem["weight_bits"], mem["split"])
        if why:
            issues.append(Issue("memory.weight_bits", why))
    if mem["static_buffer_bytes"] > spec.mu_bytes:
        issues.append(Issue("memory.static_buffer_bytes", f"{mem['static_buffer_bytes']} is larger than an MU"))
    reclaim = ReclaimParams(mem["reclaim"], mem["weight_bits"], mem["split"], mem["on_unsplittable"])
    workload = _workload(wl, spec, lay, issues)
    if issues:
        raise ConfigError("config", issues)
    return ChipConfig(
        spec=spec, noc=noc_params_for(spec, run["seed"], **timing), network=noc["model"], sizing=sizing,
        policy=policy, reclaim=reclaim, workload=workload, on_oom=mem["on_oom"], placement=mem["placement"],
        jitter=noc["jitter"], seed=run["seed"], max_cycles=run["max_cycles"], sample_cycles=run["sample_cycles"],
        trace=trace, trace_limit=run["trace_limit"], memory_map_cycle=memory_map,
    )


def _tile_of(value, key: str, spec, lay, want: int | None, issues: list[Issue]):
    if not isinstance(value, list) or len(value) != 2:
        issues.append(Issue(key, f"expected [row, col], got {value!r}"))
        return None
    r, c = value
    if not (0 <= r < spec.rows and 0 <= c < spec.cols):
        issues.append(Issue(key, f"tile {value} is outside the {spec.rows}x{spec.cols} grid"))
        return None
    kind = int(lay.kind[r * spec.cols + c])
    if want is not None and kind != want:
        names = {CU: "compute unit (row + col even)", MU: "memory unit (row + col odd)"}
        issues.append(Issue(key, f"tile {value} holds a {names[kind].split(' (')[0]}; this needs a {names[want]}"))
        return None
    return (r, c)


def _dist_of(d: dict) -> Dist:
    return Dist(d["dist"], d["mean"], d["min"], d["max"], d["sigma"])


def _workload(wl: dict, spec, lay, issues: list[Issue]):
    kind = wl["kind"]
    n_cu = len(lay.cus)
    if kind in ("kv-decode", "spec-decode"):
        d = wl["decode"]
        sched = _tile_of(d["scheduler_tile"], "workload.decode.scheduler_tile", spec, lay, CU, issues)
        if d["max_batch"] > n_cu - 1:
            issues.append(Issue("workload.decode.max_batch", f"{d['max_batch']} sequences need that many worker CUs; "
                                f"the chip has {n_cu - 1} besides the scheduler"))
        for name in ("prompt_tokens", "output_tokens"):
            if d[name]["min"] > d[name]["max"]:
                issues.append(Issue(f"workload.decode.{name}.min", "is larger than max"))
        return KvParams(kind=kind, requests=d["requests"], max_batch=d["max_batch"], layers=d["layers"],
                        heads=d["heads"], head_dim=d["head_dim"], dtype_bytes=d["dtype_bytes"],
                        prompt=_dist_of(d["prompt_tokens"]), output=_dist_of(d["output_tokens"]),
                        arrival_interval=d["arrival_interval"],
                        scheduler_tile=(sched[0] * spec.cols + sched[1]) if sched else 0,
                        draft=d["draft"], accept=d["accept"])
    if kind == "moe":
        d = wl["moe"]
        sched = _tile_of(d["scheduler_tile"], "workload.moe.scheduler_tile", spec, lay, CU, issues)
        if d["top_k"] > d["experts"]:
            issues.append(Issue("workload.moe.top_k", f"{d['top_k']} is more than the {d['experts']} experts"))
        if d["producers"] > n_cu - 2:
            issues.append(Issue("workload.moe.producers", f"{d['producers']} leaves no CU for the experts "
                                f"({n_cu} CUs, one is the scheduler)"))
        return MoeParams(steps=d["steps"], tokens=d["tokens"], experts=d["experts"], top_k=d["top_k"],
                         skew=d["skew"], hidden=d["hidden"], expert_ffn=d["expert_ffn"], dtype_bytes=d["dtype_bytes"],
                         producers=d["producers"], expert_cus=d["expert_cus"],
                         scheduler_tile=(sched[0] * spec.cols + sched[1]) if sched else 0)
    d = wl["race"]
    p = _tile_of(d["producer"], "workload.race.producer", spec, lay, CU, issues)
    c = _tile_of(d["consumer"], "workload.race.consumer", spec, lay, CU, issues)
    mem = _tile_of(d["memory"], "workload.race.memory", spec, lay, MU, issues)
    jams = [_tile_of(j, f"workload.race.jammers[{i}]", spec, lay, MU, issues) for i, j in enumerate(d["jammers"])]
    if p and c and p == c:
        issues.append(Issue("workload.race.consumer", "must differ from the producer"))
    return RaceParams(trials=d["trials"], producer=p or (0, 0), consumer=c or (0, 0), memory=mem or (0, 1),
                      jammers=tuple(j for j in jams if j), jam_bytes=d["jam_bytes"], lead_cycles=d["lead_cycles"],
                      hold_cycles=d["hold_cycles"], gap_cycles=d["gap_cycles"], data_bytes=d["data_bytes"])

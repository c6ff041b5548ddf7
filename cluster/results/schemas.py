"""Every result table's Arrow schema, in one place, with a line of documentation per column.

Each row of every table carries the run's identity (run id, config hash, seed, rdasim
version), so rows from thousands of runs can be concatenated and still be told apart.
The README's result-column reference is generated from this module
(``python -m cluster.results.schemas``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cluster.version import code_version
from sim.chip.messages import KINDS as MESSAGE_KINDS
from sim.chip.records import BufferLife, columns
from sim.serving.metrics import RequestRow
from sim.system.records import StepRecord
from sim.workloads.serve.figures import AnchorLog, StepLog

_COLUMN_TYPES = (list, tuple, np.ndarray, pa.Array, pa.ChunkedArray)


def code_identity() -> dict:
    """The code columns of every row (rdasim_version, rdasim_commit, rdasim_dirty), for run.json too."""
    v = code_version()
    return {"rdasim_version": v.version, "rdasim_commit": v.commit, "rdasim_dirty": v.dirty}


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str


@dataclass(frozen=True)
class RunMeta:
    """Identity stamped on every row."""

    run_id: str
    config_hash: str
    seed: int
    version: str = ""

    def columns(self) -> dict:
        code = code_identity()
        return {
            "run_id": self.run_id,
            "config_hash": self.config_hash,
            "seed": int(self.seed),
            **code,
            "rdasim_version": self.version or code["rdasim_version"],
        }


META_COLUMNS = [
    Column("run_id", pa.string(), "identifier of the run (config hash + seed + start time)"),
    Column("config_hash", pa.string(), "hash of the fully resolved config"),
    Column("seed", pa.int64(), "global random seed"),
    Column("rdasim_version", pa.string(), "rdasim package version"),
    Column("rdasim_commit", pa.string(), "git commit of the rdasim checkout that ran (null outside a checkout)"),
    Column("rdasim_dirty", pa.bool_(), "the checkout's code differed from that commit (null outside a checkout)"),
]


def record_columns(record: type) -> tuple[Column, ...]:
    """The columns a typed record declares (sim/chip/records.py ``column``), in field order."""
    return tuple(Column(name, pa.type_for_alias(arrow), doc) for name, arrow, doc in columns(record))


@dataclass(frozen=True)
class TableSchema:
    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def arrow(self) -> pa.Schema:
        cols = list(self.columns) + META_COLUMNS
        return pa.schema([pa.field(c.name, c.type) for c in cols], metadata={"table": self.name})

    def build(self, data: dict, meta: RunMeta) -> pa.Table:
        """Arrow table from column arrays (or a dict of scalars for one row) plus run identity."""
        names = [c.name for c in self.columns]
        missing = [n for n in names if n not in data]
        extra = [n for n in data if n not in names]
        if missing or extra:
            raise ValueError(f"{self.name}: missing columns {missing}, unexpected {extra}")
        if not any(isinstance(data[n], _COLUMN_TYPES) for n in names):  # one row of scalars
            data = {n: [data[n]] for n in names}
        length = len(data[names[0]]) if names else 0
        arrays = [_array(data[c.name], c.type) for c in self.columns]
        for key, value in meta.columns().items():  # one value, repeated without a Python list of it
            typ = next(c.type for c in META_COLUMNS if c.name == key)
            arrays.append(pa.repeat(pa.scalar(value, type=typ), length))
        return pa.Table.from_arrays(arrays, schema=self.arrow)


def _array(values, typ: pa.DataType) -> pa.Array:
    """A column as Arrow: a list, an array (a masked array's masked values are nulls) or an Arrow array."""
    if isinstance(values, np.ma.MaskedArray):
        return pa.array(np.ma.getdata(values), mask=np.ma.getmaskarray(values), type=typ)
    return pa.array(values, type=typ)


# --------------------------------------------------------------------------- NoC
NOC_SUMMARY = TableSchema(
    "noc_summary",
    "one row per simulated offered load (rdasim noc)",
    (
        Column("topology", pa.string(), "mesh or torus"),
        Column("rows", pa.int32(), "router rows"),
        Column("cols", pa.int32(), "router columns"),
        Column("traffic", pa.string(), "synthetic traffic pattern"),
        Column("packet_flits", pa.int32(), "flits per packet"),
        Column("vcs", pa.int32(), "virtual channels per port"),
        Column("vc_buffers", pa.int32(), "flit buffers per virtual channel"),
        Column("shards", pa.int32(), "number of shards the grid was cut into"),
        Column("backend", pa.string(), "local or ray"),
        Column("rate", pa.float64(), "configured offered load, flits/node/cycle"),
        Column("offered", pa.float64(), "offered load, flits/node/cycle, measured over the window"),
        Column("accepted", pa.float64(), "accepted throughput, flits/node/cycle ejected in the window"),
        Column("avg_latency", pa.float64(), "mean packet latency, cycles (creation to tail ejection)"),
        Column("p50_latency", pa.float64(), "median packet latency, cycles"),
        Column("p99_latency", pa.float64(), "99th percentile packet latency, cycles"),
        Column("max_latency", pa.float64(), "largest packet latency, cycles"),
        Column("avg_network_latency", pa.float64(), "mean latency from head injection to tail ejection"),
        Column("avg_hops", pa.float64(), "mean links traversed per measured packet"),
        Column("measured_packets", pa.int64(), "packets created in the measurement window"),
        Column("saturated", pa.bool_(), "true if measured packets did not drain (beyond saturation)"),
        Column("sim_cycles", pa.int64(), "simulated cycles (warm-up + measurement + drain)"),
        Column("epochs", pa.int64(), "lockstep epochs executed"),
        Column("lookahead", pa.int64(), "epoch length bound, cycles"),
        Column("wall_seconds", pa.float64(), "wall-clock seconds of the simulation"),
        Column("flits_in_network", pa.float64(), "time-averaged flits in source queues and network"),
        Column("littles_law_error", pa.float64(), "|L - lambda W| / L over the measurement window"),
        Column("max_source_backlog", pa.int64(), "largest (created - delivered) flits of one source over the window"),
        Column("result_hash", pa.string(), "hash of every measured packet's (id, src, dst, inject, eject)"),
    ),
)

NOC_LINKS = TableSchema(
    "noc_links",
    "one row per directed link and offered load: utilisation over the measurement window",
    (
        Column("offered_rate", pa.float64(), "configured injection rate of the run, flits/node/cycle"),
        Column("src_router", pa.int32(), "upstream router id (row * cols + col)"),
        Column("dst_router", pa.int32(), "downstream router id"),
        Column("src_row", pa.int32(), "upstream router row"),
        Column("src_col", pa.int32(), "upstream router column"),
        Column("direction", pa.string(), "E, W, S or N (+col, -col, +row, -row)"),
        Column("flits", pa.int64(), "flits that traversed the link in the measurement window"),
        Column("utilization", pa.float64(), "flits per cycle over the measurement window"),
    ),
)

ALL_TABLES: list[TableSchema] = [NOC_SUMMARY, NOC_LINKS]

# --------------------------------------------------------------------------- mapping
MAP_PLAN = TableSchema(
    "map_plan",
    "one row per mapping (rdasim map): the chosen parallelism and its end-to-end figures",
    (
        Column("workload", pa.string(), "workload name (preset or generator)"),
        Column("system", pa.string(), "topology and shape, e.g. r_r 8x128"),
        Column("chip", pa.string(), "chip name"),
        Column("chips", pa.int64(), "number of chips"),
        Column("status", pa.string(), "optimal, feasible (time limit; see gap) or infeasible"),
        Column("reason", pa.string(), "for an infeasible mapping: the constraint that fails"),
        Column("tp", pa.int32(), "tensor-parallel group size"),
        Column("pp", pa.int32(), "pipeline stages"),
        Column("dp", pa.int32(), "data-parallel replicas"),
        Column("copies", pa.int32(), "independent copies of the system"),
        Column("micro_batch", pa.int32(), "micro-batch size"),
        Column("tile_size", pa.int32(), "tile along the tiled dimension"),
        Column("layers_per_stage", pa.int32(), "graph repetitions per pipeline stage"),
        Column("num_micro_batches", pa.int64(), "micro-batches per pipeline"),
        Column("pipeline_factor", pa.float64(), "1 + (PP-1)/(micro-batches * c): the pipeline bubble"),
        Column("seconds_per_batch", pa.float64(), "end-to-end time per global batch, s"),
        Column("lower_bound_seconds", pa.float64(), "proven lower bound on seconds_per_batch"),
        Column("gap", pa.float64(), "(seconds - bound) / seconds"),
        Column("utilization", pa.float64(), "total FLOP / (time * chips * peak FLOP/s)"),
        Column("cost", pa.float64(), "system cost, $"),
        Column("power", pa.float64(), "system power, W"),
        Column("p2p_seconds", pa.float64(), "pipeline point-to-point time per batch, s"),
        Column("collective_bytes", pa.float64(), "inter-chip pass optimum: collective bytes per graph pass"),
        Column("dram_bytes", pa.float64(), "peak DRAM use per chip, bytes"),
        Column("solver_seconds", pa.float64(), "wall-clock seconds of the whole search"),
        Column("candidates", pa.int32(), "parallelism/tile/micro-batch candidates considered"),
        Column("pruned", pa.int32(), "candidates discarded by bound or dominance"),
    ),
)

MAP_KERNELS = TableSchema(
    "map_kernels",
    "one row per kernel of the mapped graph",
    (
        Column("kernel", pa.string(), "kernel name"),
        Column("kind", pa.string(), "gemm_weight, gemm, elementwise or elementwise2"),
        Column("phase", pa.string(), "fwd or bwd"),
        Column("split_dim", pa.string(), "dimension split over the TP group (outer, m, k, n, none)"),
        Column("partition", pa.int32(), "partition (config) the kernel runs in"),
        Column("flop", pa.float64(), "FLOP per chip per graph pass"),
        Column("compute_seconds", pa.float64(), "compute time of the kernel alone, s"),
        Column("network_seconds", pa.float64(), "collective time charged to the kernel, s"),
        Column("weight_bytes", pa.float64(), "weight shard per chip, bytes"),
        Column("streamed", pa.bool_(), "weight sliced while the kernel runs alone (DFModel's tiling factor)"),
        Column("collectives", pa.string(), "collectives issued, comma separated"),
    ),
)

MAP_PARTITIONS = TableSchema(
    "map_partitions",
    "one row per partition (config) of the chip, in execution order",
    (
        Column("partition", pa.int32(), "partition index"),
        Column("kernels", pa.int32(), "kernels in the partition"),
        Column("compute_seconds", pa.float64(), "compute time per graph pass, s"),
        Column("memory_seconds", pa.float64(), "DRAM time per graph pass, s"),
        Column("network_seconds", pa.float64(), "network time per graph pass, s"),
        Column("seconds", pa.float64(), "partition time (max or sum of the three), s"),
        Column("sram_bytes", pa.float64(), "SRAM in use, bytes"),
    ),
)

ALL_TABLES.extend([MAP_PLAN, MAP_KERNELS, MAP_PARTITIONS])

# --------------------------------------------------------------------------- ---- sweeps
# Columns `rdasim sweep` adds to every row of a point's tables (before the table's own
# columns); the swept config values follow as one column per dotted path ("noc.rate" ->
# "noc_rate"), typed from the resolved values.
SWEEP_COLUMNS = [
    Column("sweep_id", pa.string(), "sweep name ([sweep] name); also the first hive partition level"),
    Column("sweep_spec", pa.string(), "hash of the spec version that computed the point (see the manifest's specs)"),
    Column("point_id", pa.string(), "stable point id: hash of what the point's config asks for (its keys away "
           "from their defaults, files by content)"),
    Column("point_index", pa.int64(), "position of the point in the spec's expansion"),
    Column("point_status", pa.string(), "ok, or error (the point failed: see point_error)"),
    Column("point_error", pa.string(), "error message of a failed point (null when ok)"),
    Column("point_traceback", pa.string(), "traceback of a failed point (null when ok)"),
    Column("point_attempts", pa.int32(), "times the point was started (system failures are retried)"),
    Column("point_node", pa.string(), "Ray node id the point ran on (last attempt)"),
    Column("point_seconds", pa.float64(), "wall-clock seconds of the point's job on its worker"),
]

SWEEP_NOOP = TableSchema(
    "sweep_noop",
    "one row per point of the built-in `noop` sweep command (tests and overhead benchmarks)",
    (
        Column("value", pa.float64(), "the configured noop.value, echoed back"),
        Column("slept", pa.float64(), "seconds the point slept (noop.sleep)"),
    ),
)

ALL_TABLES.append(SWEEP_NOOP)


# --------------------------------------------------------------------------- rdasim run (chip simulation)
_I, _F, _S, _B = pa.int64(), pa.float64(), pa.string(), pa.bool_()
RUN_MESSAGE_KINDS = MESSAGE_KINDS  # one messages_<kind> column per kind (sim/chip/messages.py)

# energy (sim/energy): the run's counted actions priced by its energy table (see run_energy)
ENERGY_COLUMNS = (
    Column("energy_joules", _F, "dynamic energy of the run, J (sum of the energy_*_joules components)"),
    Column("energy_per_token_joules", _F, "energy_joules / tokens: per one of the token_unit (a generated token "
           "for decode, a routed token for moe, a trial for race, the plan's unit for dataflow; docs/run.md, "
           "\"What a token is\")"),
    Column("energy_per_batch_joules", _F, "energy_joules / batches (decode iterations; MoE steps, race trials "
           "or graph passes otherwise)"),
    *[Column(f"energy_{c}_joules", _F, f"energy of {what}, J") for c, what in (
        ("cu", "CU functional-unit operations"), ("mu", "MU SRAM reads, writes and block-table lookups"),
        ("realloc_copy", "bytes moved by realloc-copy growth"), ("noc_router", "flits through routers"),
        ("noc_link", "flits over links"), ("dram", "DRAM reads and writes"),
        ("hbm", "HBM tier reads and writes (chips with memory tiers)"),
        ("ddr", "DDR tier reads and writes (chips with memory tiers)"),
        ("protocol", "messages without data (allocation, reference counting, control)"))],
    Column("energy_table", _S, "name of the per-action energy table (energy.table)"),
)

# what a workload measured of its inputs (sim/workloads/traces.py); null when it does not apply
INPUT_COLUMNS = (
    Column("trace_requests", _I, "kv-decode/spec-decode with a trace: requests taken from the trace"),
    Column("trace_capped_prompts", _I, "trace: prompt lengths cut to workload.decode.max_prompt_tokens"),
    Column("trace_capped_outputs", _I, "trace: output lengths cut to workload.decode.max_output_tokens"),
    Column("trace_arrival_rate", _F, "trace: requests per simulated second after speed-up"),
    Column("trace_format", _S, "trace: the format read (azure, azure-multimodal, mooncake, qwen-bailian, burstgpt; "
           "docs/traces.md)"),
    Column("trace_failed_skipped", _I, "trace: rows of the window the trace marks failed (BurstGPT: Response tokens "
           "0), not served"),
    Column("trace_note", _S, "trace: what the format holds that the run does not use (azure-multimodal: NumImages); "
           "null: nothing"),
    Column("moe_skew_measured", _F, "moe: Zipf exponent fitted to the routed experts' popularity (log count vs "
           "log rank)"),
    Column("moe_load_imbalance", _F, "moe: tokens of the busiest expert / mean tokens per expert, per step, "
           "averaged over steps"),
)

_PCT = "numpy.percentile: linear interpolation between the closest ranks"
SERVING_COLUMNS = (
    Column("first_oom_utilization", _F, "share of all MU bytes holding live data when the first request found its "
           "MU out of memory (null: none did)"),
    Column("preempt_mode", _S, "on_oom = preempt: recompute or swap (null otherwise)"),
    Column("admit_watermark", _F, "share of every MU kept free when admitting (decode workloads)"),
    Column("requests_finished", _I, "decode: requests served to their last token"),
    Column("prompt_tokens", _I, "decode: prompt tokens of the requests that ended, served or refused"),
    Column("preemptions", _I, "decode: sequences preempted (on_oom = preempt), counting each time"),
    *[Column(f"{m}_p{q}_seconds", _F, f"decode: {q}th percentile of {what} over the served requests, s; "
             f"{_PCT}") for m, what in (("ttft", "the time to first token"),
                                          ("tbt", "every time between two consecutive tokens"),
                                          ("e2e", "the end-to-end latency (arrival to last token)"))
      for q in (50, 90, 99)],
    Column("slo_ttft_seconds", _F, "decode: workload.decode.slo_ttft, s (null: none)"),
    Column("slo_tbt_seconds", _F, "decode: workload.decode.slo_tbt, s (null: none)"),
    Column("goodput_requests_per_second", _F, "decode: served requests meeting both objectives (TTFT, mean TBT) "
           "per simulated second, DistServe's goodput (null without objectives)"),
    Column("slo_attainment", _F, "decode: share of the requests meeting both objectives (null without objectives)"),
    Column("prefix_blocks", _I, "prefix sharing (a trace with hash_ids, memory.prefix_sharing): shareable prompt "
           "blocks of the requests' first admissions, in the trace's blocks (null: no sharing)"),
    Column("prefix_hit_blocks", _I, "prefix sharing: of them, found held by running sequences or the prefix cache when "
           "admitted (their KV neither computed nor written again)"),
    Column("prefix_hit_rate", _F, "prefix sharing: prefix_hit_blocks / prefix_blocks"),
    Column("prefix_hit_bytes", _I, "prefix sharing: KV bytes of the hit blocks (every layer, head, K and V)"),
    Column("kv_bytes_saved", _I, "prefix sharing: most KV bytes running sequences shared at once beyond one copy of "
           "each block (memory an unshared run would have held on top)"),
)

# a serve run (sim/workloads/serve): its model, steps and the anchors that priced them; null otherwise
SERVE_COLUMNS = (
    Column("model", _S, "serve: the model served (mapping/models.py)"),
    Column("serve_steps", _I, "serve: steps run (prefill, decode or both)"),
    Column("step_mean_seconds", _F, "serve: mean simulated seconds of a step"),
    Column("prefill_tokens", _I, "serve: prompt tokens prefilled (recomputed ones again)"),
    Column("anchors", _I, "serve: step shapes whose plan was mapped and simulated to price the steps"),
    Column("anchors_cached", _I, "serve: of them, taken from workload.decode.step_cache"),
    Column("anchors_unused", _I, "serve: anchors the planning pass simulated ahead that no step needed"),
    Column("anchor_wall_seconds", _F, "serve: wall time spent mapping, placing and simulating anchors, s, summed "
           "over them (used or not; those simulated side by side overlap)"),
    Column("anchor_efficiency_min", _F, "serve: lowest anchor's simulated / roofline cycles"),
    Column("anchor_efficiency_max", _F, "serve: highest anchor's simulated / roofline cycles"),
    Column("step_error", _S, "serve: why a step could not be priced (its plan did not map, fit or run; null: none)"),
    Column("batch_max", _I, "serve: most sequences a step computed (decode and prefill): the batch reached"),
    Column("batch_mean", _F, "serve: sequences a step computed, averaged over the steps weighted by their cycles "
           "(vLLM's average batched requests, Kwon et al., SOSP 2023, Figure 13)"),
    Column("kv_reserved_peak_bytes", _I, "serve: most KV bytes the running sequences' pages held at a step's end "
           "(workload.decode.kv_reservation: what they reserved; paged: their blocks)"),
    Column("kv_used_peak_bytes", _I, "serve: most KV bytes those sequences had written at a step's end"),
    Column("kv_used_share", _F, "serve: of the reserved KV byte-cycles, the share written (1 - internal "
           "fragmentation and reservation, vLLM's Figure 2; over the steps)"),
    Column("memory_priced", _B, "serve: the MU figures are the steps' anchors' (peaks the largest, means weighted "
           "by each step's cycles) and the tier figures add the steps' bytes and flows to the simulated ones"),
    Column("tpot_p50_seconds", _F, "serve: median over served requests of the mean time a token after the first "
           "(TPOT: (last - first) / (tokens - 1)); under speculative decoding a step's tokens come at once, so "
           "tbt's gaps inside a step are 0 and this is the per-token figure"),
    Column("spec_draft_model", _S, "serve, speculative decoding: the draft model (null: off)"),
    Column("spec_k", _I, "serve, speculative decoding: draft tokens a sequence a step"),
    Column("spec_acceptance", _S, "serve, speculative decoding: the acceptance distribution "
           "(sim/workloads/serve/speculative.py)"),
    Column("spec_drafted", _I, "serve, speculative decoding: draft tokens proposed"),
    Column("spec_accepted", _I, "serve, speculative decoding: of them, accepted"),
    Column("spec_rejected", _I, "serve, speculative decoding: of them, rejected (their KV reclaimed)"),
    Column("spec_tokens_per_step", _F, "serve, speculative decoding: tokens a sequence made a verify step (accepted "
           "+ 1), the mean"),
    Column("spec_expected_tokens_per_step", _F, "serve, speculative decoding: the same by the closed form, 1 + the "
           "sum of P(a >= i) over each sequence-step's drafts (Leviathan et al. 2023 for the geometric model)"),
    Column("spec_draft_seconds", _F, "serve, speculative decoding: simulated seconds of the draft model's steps"),
    Column("kv_bytes_reclaimed", _I, "serve, speculative decoding: KV bytes the rejected drafts wrote and gave back "
           "(the served and the draft model's caches)"),
    Column("kv_bytes_freed", _I, "serve, speculative decoding: of the tier's pages, bytes given back after the "
           "steps (whole pages past the accepted lengths)"),
)

# a chip with memory tiers (sim/chip/tier_controller.py): each tier's traffic, pages and flows; null otherwise
TIER_COLUMNS = (
    *[Column(f"{t}_{what}", _I, f"{t.upper()} tier: {doc}") for t in ("hbm", "ddr") for what, doc in (
        ("read_bytes", "bytes read (every one a flow's)"),
        ("write_bytes", "bytes written, including copies from the other tier"),
        ("peak_bytes", "most bytes of its pages taken by regions at once"),
        ("flows", "transfers to or from it, each a flow"))],
    Column("tier_full_events", _I, "regions or writes a memory tier refused for want of pages"),
)

# the MUs' figures of a chip run (a serve run's: its steps' anchors')
RUN_SUMMARY_MEMORY = (
    Column("peak_mu_utilization", _F, "largest share of all MU bytes holding live data at any time"),
    Column("mean_mu_utilization", _F, "time-averaged share of all MU bytes holding live data"),
    Column("peak_mu_reserved", _F, "largest share of all MU bytes reserved by buffers (peak memory)"),
    Column("fragmentation", _F, "share of reserved byte-cycles not holding data (1 - used/reserved, integrated)"),
)

RUN_SUMMARY = TableSchema(
    "run_summary",
    "one row per chip simulation (rdasim run)",
    (
        Column("workload", _S, "kv-decode, spec-decode, moe or race"),
        Column("chip", _S, "chip preset the config started from"),
        Column("rows", pa.int32(), "tile rows"),
        Column("cols", pa.int32(), "tile columns"),
        Column("network", _S, "NoC fidelity: cycle or packet"),
        Column("policy", _S, "MU memory policy"),
        Column("reclaim", _S, "reclamation protocol of shared references"),
        Column("on_oom", _S, "out-of-memory behaviour: stall, evict, fail or preempt"),
        Column("placement", _S, "buffer placement: spread, near or random"),
        Column("weight_bits", pa.int32(), "partial-free: bits of a reference's weight (0 otherwise)"),
        Column("block_bytes", _I, "virtual: block size in bytes (0 otherwise)"),
        Column("shards", pa.int32(), "shards the grid was cut into"),
        Column("backend", _S, "local or ray"),
        Column("sim_cycles", _I, "simulated cycles until the last event; run.max_cycles for a run cut off there "
               "(every event before it simulated, none after)"),
        Column("sim_seconds", _F, "sim_cycles at the chip clock, s"),
        Column("wall_seconds", _F, "wall-clock seconds of the simulation"),
        Column("requests", _I, "requests completed or failed (sequences, MoE steps, race trials)"),
        Column("requests_failed", _I, "requests refused: out of memory under on_oom = fail, or too large to fit "
               "alone under any on_oom"),
        Column("tokens", _I, "work done, in token_unit: generated tokens (kv-decode, spec-decode), routed tokens "
               "(moe), completed trials (race), the plan's unit per graph pass (dataflow: a decode step's generated "
               "tokens, a sequence's prompt tokens, ...)"),
        Column("token_unit", _S, "what tokens, tokens_per_second and energy_per_token_joules count (docs/run.md, "
               "\"What a token is\")"),
        Column("tokens_per_second", _F, "tokens / sim_seconds, in token_unit per simulated second"),
        Column("latency_p50_cycles", _F, "median request latency (arrival to completion), cycles"),
        Column("latency_p99_cycles", _F, "99th percentile request latency, cycles"),
        Column("latency_mean_cycles", _F, "mean request latency, cycles"),
        *RUN_SUMMARY_MEMORY,
        Column("bytes_copied", _I, "bytes copied by realloc-copy growth"),
        Column("copy_cycles", _I, "MU port cycles spent copying"),
        Column("messages_total", _I, "messages sent"),
        Column("packets_total", _I, "packets sent"),
        Column("flits_total", _I, "flits sent"),
        *[Column(f"messages_{k}", _I, f"{k.replace('_', ' ')} messages sent") for k in RUN_MESSAGE_KINDS],
        Column("sync_messages", _I, "reference-count synchronisation messages: +1s, weight requests and their acks"),
        Column("sync_wait_cycles", _I, "cycles CU tasks waited for +1 acknowledgements or weight grants (summed)"),
        Column("weight_topups", _I, "partial-free: times a holder with weight 1 was topped up by its MU"),
        Column("memory_wait_cycles", _I, "cycles CU tasks waited for allocations and data (summed)"),
        Column("control_wait_cycles", _I, "cycles schedulers waited for their workers (summed)"),
        Column("compute_cycles", _I, "cycles CU pipelines computed (summed)"),
        Column("oom_events", _I, "requests that found their MU out of memory"),
        Column("stalls", _I, "requests parked until memory was freed"),
        Column("stall_cycles", _I, "cycles parked requests waited (summed)"),
        Column("evictions", _I, "buffers evicted to DRAM"),
        Column("bytes_evicted", _I, "bytes evicted to DRAM"),
        Column("oom_failures", _I, "requests refused for lack of memory"),
        Column("spill", _S, "memory.spill under the virtual policy: nearest (null when none)"),
        Column("spilled_blocks", _I, "spill: blocks other MUs granted to buffers whose MU was full"),
        Column("spilled_bytes", _I, "spill: data bytes written into those blocks"),
        Column("remote_reads", _I, "spill: reads of those blocks (one per MU a read touched), each a request and "
                                   "its data over the NoC"),
        Column("stalled_at_end", _I, "requests still parked when the run ended (a deadlock if > 0)"),
        Column("use_after_free", _I, "oracle: operations on freed allocations"),
        Column("double_free", _I, "oracle: frees of already-freed allocations"),
        Column("premature_free", _I, "oracle: frees while true references were live"),
        Column("leaks", _I, "oracle: allocations never freed by the end of a completed run (0 when it did not "
                            "complete: see live_at_end)"),
        Column("live_at_end", _I, "oracle: allocations not freed when a run that did not complete stopped (in "
                                  "use, or their free still to come: not leaks)"),
        Column("completed", _B, "every request of the workload finished (served or refused)"),
        Column("status", _S, "completed; failed (requests refused for lack of memory); cut_off (stopped at "
                             "run.max_cycles); deadlocked (work left, nothing pending anywhere); failed also for "
                             "a sweep point that raised"),
        Column("status_detail", _S, "why a run did not complete: who waits on what, e.g. \"4 append requests "
                                    "stalled out of memory at 4 MUs; ...\" (empty when completed)"),
        Column("cut_off", _B, "the run reached run.max_cycles with events still pending"),
        Column("epochs", _I, "lockstep epochs executed"),
        Column("lookahead", _I, "epoch length bound, cycles (0 with one shard)"),
        Column("result_hash", _S, "hash of every delivery, oracle event, buffer life and figure"),
        *ENERGY_COLUMNS,
        *INPUT_COLUMNS,
        *SERVING_COLUMNS,
        *TIER_COLUMNS,
        *SERVE_COLUMNS,
    ),
)

RUN_REQUESTS = TableSchema("run_requests", "one row per request of a decode or serving run (kv-decode, spec-decode, "
                           "serve, serve-system) that ended, served or refused: its latencies (docs/run.md, "
                           "\"Serving metrics\")",
                           record_columns(RequestRow))  # declared once, on the record (sim/serving/metrics.py)

RUN_MU_SERIES = TableSchema(
    "run_mu_series",
    "one row per MU and sample time: bytes in use and reserved",
    (
        Column("cycle", _I, "sample cycle"),
        Column("mu", pa.int32(), "MU unit id (its tile id)"),
        Column("row", pa.int32(), "tile row"),
        Column("col", pa.int32(), "tile column"),
        Column("used_bytes", _I, "bytes of live data"),
        Column("reserved_bytes", _I, "bytes reserved by buffers (blocks, regions, slots)"),
        Column("utilization", _F, "used_bytes / MU capacity"),
    ),
)

RUN_BUFFERS = TableSchema("run_buffers", "one row per allocation: its life at its MU",
                          record_columns(BufferLife))  # declared once, on the record (sim/chip/records.py)

RUN_LINKS = TableSchema(
    "run_links",
    "one row per directed router-to-router link: flits over the whole run",
    (
        Column("src_router", pa.int32(), "upstream router (tile) id"),
        Column("dst_router", pa.int32(), "downstream router id"),
        Column("src_row", pa.int32(), "upstream row"),
        Column("src_col", pa.int32(), "upstream column"),
        Column("direction", _S, "E, W, S or N"),
        Column("flits", _I, "flits that crossed the link"),
        Column("utilization", _F, "flits per simulated cycle"),
    ),
)

RUN_PARTITIONS = TableSchema(
    "run_partitions",
    "one row per partition run of a mapped (dataflow) simulation: simulated beside DFModel's time",
    (
        Column("partition", _I, "partition run (graph pass x partitions + position)"),
        Column("index", pa.int32(), "the plan's partition index"),
        Column("kernels", pa.int32(), "kernels in the partition"),
        Column("tiles", _I, "tiles streamed through it"),
        Column("simulated_seconds", _F, "from its buffers' allocation to its last CU finishing, s"),
        Column("setup_seconds", _F, "allocating and sharing its buffers before its CUs start, s"),
        Column("analytic_seconds", _F, "DFModel's time of the partition, s"),
        Column("ratio", _F, "simulated / analytic"),
        Column("bound", _S, "DFModel's largest term: compute, memory or network"),
        Column("compute_seconds", _F, "DFModel's compute term, s"),
        Column("memory_seconds", _F, "DFModel's memory term, s"),
        Column("network_seconds", _F, "DFModel's network term, s"),
        Column("traffic_byte_hops", _F, "placement: bytes x hops per tile between its CUs and MUs"),
        Column("traffic_bound", _F, "placement: lower bound on traffic_byte_hops"),
        Column("status", _S, "ok or failed"),
    ),
)

RUN_KERNELS = TableSchema(
    "run_kernels",
    "one row per kernel and partition run of a mapped (dataflow) simulation",
    (
        Column("partition", _I, "partition run"),
        Column("kernel", _S, "kernel name"),
        Column("cus", pa.int32(), "CUs it ran on"),
        Column("compute_cycles", _I, "cycles its CUs computed (summed)"),
        Column("busy", _F, "compute_cycles / (CUs x the partition's cycles after its start)"),
        Column("bytes_in", _I, "bytes its CUs read from MUs and DRAM"),
        Column("bytes_out", _I, "bytes its CUs wrote to MUs and DRAM"),
        Column("start", _I, "cycle its first CU started"),
        Column("end", _I, "cycle its last CU finished"),
    ),
)

RUN_ENERGY = TableSchema(
    "run_energy",
    "one row per component and action: what the run did and what it cost under its energy table",
    (
        Column("component", _S, "cu, mu, realloc_copy, noc_router, noc_link, dram or protocol"),
        Column("action", _S, "what is counted (fu_op, read_byte, write_byte, translation, byte, flit_bit, message)"),
        Column("count", _I, "actions counted over the whole run"),
        Column("energy_per_action_pj", _F, "energy of one action in the run's table, pJ"),
        Column("joules", _F, "count x energy_per_action_pj, J"),
        Column("share", _F, "joules / the run's energy_joules"),
    ),
)

RUN_STEPS = TableSchema("run_steps", "one row per step of a serve run: what it processed and its priced span "
                        "(docs/run.md, \"Serving real models\")", record_columns(StepLog))
RUN_ANCHORS = TableSchema("run_anchors", "one row per anchor of a serve run: a step shape whose plan was mapped, "
                          "kernel-looped and simulated cycle by cycle to price the steps", record_columns(AnchorLog))

ALL_TABLES.extend([RUN_SUMMARY, RUN_MU_SERIES, RUN_BUFFERS, RUN_LINKS, RUN_PARTITIONS, RUN_KERNELS, RUN_ENERGY,
                   RUN_REQUESTS, RUN_STEPS, RUN_ANCHORS])
# --------------------------------------------------------------------------- end of rdasim run

# --------------------------------------------------------------------------- ---- allocators
ALLOC_MEMORY_SUMMARY = TableSchema(
    "alloc_memory_summary",
    "one row per memory (bank type) of a lockstep bank allocator: tt-metal's memory usage summary",
    (
        Column("memory", pa.string(), "memory name, e.g. DRAM or L1"),
        Column("kind", pa.string(), "dram (allocates bottom-up) or l1/sram (top-down)"),
        Column("banks", pa.int32(), "banks allocated in lockstep (same offset in each)"),
        Column("bank_size", pa.int64(), "bytes per bank"),
        Column("allocatable_per_bank", pa.int64(), "bytes per bank above the reserved and circular-buffer regions"),
        Column("allocated_per_bank", pa.int64(), "bytes per bank in allocated buffers (padded sizes)"),
        Column("free_per_bank", pa.int64(), "allocatable minus allocated, bytes per bank"),
        Column("largest_free_block", pa.int64(), "largest contiguous free block in a bank, bytes"),
        Column("total_allocatable", pa.int64(), "allocatable_per_bank x banks"),
        Column("total_allocated", pa.int64(), "allocated_per_bank x banks"),
        Column("total_free", pa.int64(), "free_per_bank x banks"),
    ),
)

ALLOC_L1_SUMMARY = TableSchema(
    "alloc_l1_summary",
    "one row per SRAM (L1) memory: room left for interleaved buffers (tt-metal's L1 usage summary)",
    (
        Column("memory", pa.string(), "memory name"),
        Column("banks", pa.int32(), "banks allocated in lockstep"),
        Column("largest_free_block", pa.int64(), "largest contiguous free block in a bank, bytes"),
        Column("largest_interleaved_buffer", pa.int64(), "largest_free_block x banks: biggest buffer that still fits"),
        Column("free_per_bank", pa.int64(), "free bytes per bank (not necessarily contiguous)"),
        Column("total_free", pa.int64(), "free_per_bank x banks"),
        Column("circular_buffer_bytes", pa.int64(), "bytes per bank in the circular-buffer region"),
    ),
)

ALLOC_BLOCKS = TableSchema(
    "alloc_blocks",
    "one row per block of one bank (every bank is alike), address order: tt-metal's detailed memory listing",
    (
        Column("memory", pa.string(), "memory name"),
        Column("address", pa.int64(), "block start, bytes from the bank base"),
        Column("size", pa.int64(), "block size, bytes"),
        Column("allocated", pa.bool_(), "false for a free block"),
        Column("use", pa.string(), "reserved, circular_buffer, buffer or free"),
    ),
)

ALL_TABLES.extend([ALLOC_MEMORY_SUMMARY, ALLOC_L1_SUMMARY, ALLOC_BLOCKS])
# --------------------------------------------------------------------------- end of allocators

def columns_markdown(title: str, doc: str, columns: list) -> str:
    """One table's columns as a Markdown section (its name, what a row is, each column)."""
    rows = "\n".join(f"| `{c.name}` | {c.type} | {c.doc} |" for c in columns)
    return f"### {title}\n\n{doc[0].upper() + doc[1:]}.\n\n| column | type | meaning |\n|---|---|---|\n{rows}\n"


def reference_markdown() -> str:
    """The result-column reference: the columns every table carries, then each table's
    (docs/reference.md's "Result columns", which cluster/config/docs.py writes from this)."""
    parts = [columns_markdown("Every table", "the run's identity, in every row of every table below", META_COLUMNS)]
    parts += [columns_markdown(f"`{t.name}`", t.doc, list(t.columns)) for t in ALL_TABLES]
    return "\n".join(parts)


# --------------------------------------------------------------------------- rdasim run with a [system]
SYSTEM_SUMMARY = TableSchema(
    "system_summary",
    "one row per system simulation (rdasim run with a [system])",
    (
        Column("workload", _S, "collective, pipeline, expert-parallel (box chips) or dataflow (grid chips)"),
        Column("chips", _I, "chips in the system"),
        Column("chip", _S, "the chip of every node"),
        Column("topology", _S, "DFModel's shape name: r, sw, fc per dimension (r_r: a 2-D torus)"),
        Column("fidelity", _S, "box: a chip is its mapped partitions' times behind its network interface; "
               "grid: its whole CU/MU grid and NoC"),
        Column("status", _S, "completed, deadlocked or cut_off"),
        Column("status_detail", _S, "why, when not completed"),
        Column("sim_cycles", _I, "simulated cycles at the chips' clock"),
        Column("sim_seconds", _F, "simulated seconds"),
        Column("messages_total", _I, "messages between chips"),
        Column("bytes_total", _I, "bytes between chips"),
        Column("seconds_simulated", _F, "pipeline: simulated seconds of the micro-batches run"),
        Column("seconds_per_batch_analytic", _F, "pipeline: DFModel's seconds per batch"),
        Column("bubble_fraction", _F, "pipeline: share of the run a stage waited, as it emerged"),
        Column("seconds_per_batch_simulated", _F, "grid chips: simulated seconds per batch of the slowest chip"),
        Column("step_seconds_mean", _F, "expert-parallel: mean seconds of a step (dispatch, experts, combine)"),
        Column("expert_imbalance", _F, "expert-parallel: most tokens a chip's experts took / the mean"),
        Column("landing_bytes_peak", _I, "expert-parallel: most bytes of tokens that landed on a chip in a step"),
        Column("landing_bytes_static", _I, "expert-parallel: what a static landing buffer must reserve"),
        Column("tp", _I, "serve-system: chips of the tensor-parallel group"),
        Column("tokens", _I, "serve-system: tokens generated"),
        Column("requests_failed", _I, "serve-system: requests refused"),
        *(c for c in SERVING_COLUMNS if c.name in ("requests_finished", "prompt_tokens", "preemptions",
                                                   "slo_ttft_seconds", "slo_tbt_seconds",
                                                   "goodput_requests_per_second", "slo_attainment",
                                                   "kv_bytes_saved")
          or c.name.endswith("_seconds") and c.name[:4] in ("ttft", "tbt_", "e2e_") or c.name.startswith("prefix_")),
        *(c for c in SERVE_COLUMNS if c.name in ("model", "serve_steps", "anchors", "anchors_cached",
                                                 "anchors_unused", "anchor_wall_seconds", "anchor_efficiency_min",
                                                 "anchor_efficiency_max")),
        Column("token_unit", _S, "serve-system: what tokens and energy_per_token_joules count (generated tokens)"),
        *(Column(c.name, c.type, f"serve-system: a chip's {c.doc}, from its steps' anchors (every chip runs the same "
                 "slice)") for c in RUN_SUMMARY_MEMORY),
        *(Column(f"hbm_{what}", _I, f"serve-system: HBM {doc}, every chip's steps") for what, doc in (
            ("read_bytes", "bytes read"), ("write_bytes", "bytes written"), ("flows", "flows"))),
        *(c for c in INPUT_COLUMNS if c.name.startswith("trace_")),
        *ENERGY_COLUMNS,
        Column("use_after_free", _I, "grid chips: oracle over every chip's log (references cross chips)"),
        Column("double_free", _I, "grid chips: oracle: frees of already-freed allocations"),
        Column("premature_free", _I, "grid chips: oracle: frees while true references (on any chip) were live"),
        Column("leaks", _I, "grid chips: oracle: allocations never freed by the end of a completed run"),
        Column("live_at_end", _I, "grid chips: oracle: allocations not freed when a run that did not complete "
                                  "stopped (not leaks)"),
        Column("shards", pa.int32(), "shards (groups of chips) the run was cut into"),
        Column("backend", _S, "local or ray"),
        Column("epochs", _I, "lockstep epochs"),
        Column("lookahead", _I, "least latency of a link between shards, cycles (0: one shard)"),
        Column("wall_seconds", _F, "wall-clock seconds of the simulation"),
        Column("result_hash", _S, "hash of every step record, every link's bytes and the integer figures"),
    ),
)

SYSTEM_STEPS = TableSchema("system_steps", "one row per step a chip's program recorded (a collective, a pipeline "
                           "stage's micro-batches)", record_columns(StepRecord))  # declared on the record

SYSTEM_LINKS = TableSchema(
    "system_links",
    "one row per directed inter-chip link",
    (
        Column("src", _I, "node it leaves (chips first, then switches)"),
        Column("dst", _I, "node it enters"),
        Column("dim", pa.int32(), "network dimension"),
        Column("bytes", _I, "bytes it carried"),
        Column("utilization", _F, "bytes / (simulated cycles x bytes per cycle)"),
    ),
)

SYSTEM_CHIPS = TableSchema(
    "system_chips",
    "grid fidelity: one row per chip, each summarised as a run of its own",
    (
        Column("chip", _I, "chip"),
        Column("sim_cycles", _I, "cycle its last unit finished"),
        Column("compute_cycles", _I, "cycles its CUs computed"),
        Column("messages_total", _I, "messages its units sent (NoC and other chips)"),
        Column("sync_wait_cycles", _I, "cycles its CUs waited on flow control between kernels"),
        Column("memory_wait_cycles", _I, "cycles its CUs waited on memory"),
        Column("peak_mu_utilization", _F, "peak share of its MU bytes holding data"),
        Column("oom_events", _I, "allocations that found no room"),
        Column("stalls", _I, "tasks stalled on allocation"),
        Column("landing_buffers", _I, "MoE over grid chips: landing buffers other chips wrote tokens into (freed)"),
        Column("landing_bytes", _I, "MoE over grid chips: bytes of tokens that landed in them (what the routing sent)"),
        Column("landing_reserved_bytes", _I, "MoE over grid chips: bytes the memory policy held for them "
               "(blocks, grown regions, static slots), summed over the buffers"),
        Column("landing_reserved_peak", _I, "MoE over grid chips: most bytes the policy held for one of them"),
        Column("completed", pa.bool_(), "its program finished"),
        Column("result_hash", _S, "its own run's result hash"),
    ),
)

ALL_TABLES.extend([SYSTEM_SUMMARY, SYSTEM_STEPS, SYSTEM_LINKS, SYSTEM_CHIPS])

# Last in the module, so every table above is registered before the reference is printed.
if __name__ == "__main__":  # pragma: no cover
    print(reference_markdown())

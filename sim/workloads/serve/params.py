"""The serve workload's parameters: a real model served from a request trace at its recorded times.

``workload.kind = "serve"`` reads the [workload.decode] table the decode workloads read (the
requests: a trace or drawn lengths and arrivals, the latency objectives; the keys are the
very fields kv-decode declares) and its own keys: the model (mapping/models.py), the batch
limits, chunked prefill, and how steps are priced (costs.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from mapping.models import MODELS, ModelSpec
from sim.chip.spec import CU
from sim.keys import Field, Issue, Table
from sim.serving.lengths import Dist, dist_of
from sim.serving.metrics import SERVED, Objectives, PreemptionLog, RequestLog, prompt_figures, serving_figures
from sim.serving.requests import prefix_block_issues, trace_of
from sim.serving.trace import RequestTrace
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.base import tile_id, tile_of
from sim.workloads.capabilities import Capabilities
from sim.workloads.kv_decode import KvParams
from sim.workloads.serve.costs import CALL_SYNC, CostOptions
from sim.workloads.serve.reservation import MAX_MODEL_LEN, RESERVATIONS, batch_figures
from sim.workloads.serve.speculative import ACCEPTANCE, Speculative, speculative_of

SHARED = ("requests", "prompt_tokens", "output_tokens", "arrival_interval", "scheduler_tile", "trace", "trace_format",
          "trace_model", "trace_start", "trace_duration", "trace_speedup", "trace_jitter", "max_prompt_tokens",
          "max_output_tokens", "slo_ttft", "slo_tbt", "prefix_block_tokens")  # kv-decode's keys, read alike


@WORKLOADS.register("serve")
@dataclass(frozen=True)
class ServeParams(Workload):
    kind: str = "serve"
    model: ModelSpec = MODELS["llama-3.1-8b"]
    requests: int = 32
    max_sequences: int = 256
    max_step_tokens: int = 8192
    chunk_tokens: int = 0  # 0: a prompt is prefilled in one step
    prompt: Dist = field(default_factory=lambda: Dist("uniform", 128, 32, 256))
    output: Dist = field(default_factory=lambda: Dist("uniform", 64, 16, 128))
    arrival_interval: int = 0
    scheduler_tile: int = 0
    trace: RequestTrace | None = None
    slo_ttft: float = 0.0
    slo_tbt: float = 0.0
    costs: CostOptions = CostOptions()
    tier: str = "hbm"  # the memory tier the weights and KV caches live in (the chip's first)
    trace_jitter: int = 0  # cycles: each trace arrival moves later by a uniform draw in [0, this) (kv-decode's)
    prefix_block_tokens: int = 0  # tokens of a shared prefix block (0: the trace's block; kv-decode's)
    kv_reservation: str = "paged"  # what an admitted request's KV reserves (reservation.py)
    max_model_len: int = MAX_MODEL_LEN  # kv_reservation = "max": the tokens each request reserves
    speculative: Speculative | None = None  # speculative decoding with a draft model (speculative.py); None: off

    SECTION: ClassVar[str] = "decode"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False, preempts=True)
    TABLES: ClassVar[tuple[str, ...]] = ("run_requests", "run_steps", "run_anchors")  # steps, the anchors pricing them
    WORK_UNIT: ClassVar[str] = "requests"
    token_unit: ClassVar[str] = "generated tokens"
    UNHASHED: ClassVar[tuple[str, ...]] = ("anchors_cached", "anchors_unused")  # from the step cache, workers
    KEYS: ClassVar[Table] = Table({
        **{k: KvParams.KEYS.fields[k] for k in SHARED},
        "model": Field("choice", "llama-3.1-8b", "serve: the model served, by its published configuration "
                       "(mapping/models.py)", choices=tuple(MODELS)),
        "max_sequences": Field("int", 256, "serve: sequences running at once at most (vLLM's max_num_seqs)", min=1),
        "max_step_tokens": Field("int", 8192, "serve: tokens a step processes at most, decode and prefill "
                                 "(vLLM's max_num_batched_tokens; a whole prompt longer than it runs alone)", min=1),
        "chunk_tokens": Field("int", 0, "serve: chunked prefill, a prompt's tokens a step takes at most (Sarathi-"
                              "Serve); 0: a prompt is prefilled in one step", min=0),
        "step_anchor_ratio": Field("float", 4.0, "serve: steps are priced from anchors whose tokens are powers of "
                                   "this (1: every shape simulated)", min=1.0),
        "step_context_ratio": Field("float", 16.0, "serve: anchors' pairs and cached tokens a token at powers of "
                                    "this", min=1.0),
        "step_tiles": Field("int", 32, "serve: tiles a layer of a compute-bound anchor's plan at most (a "
                            "memory-bound one runs in one)", min=1),
        "step_stream_bytes": Field("size", 64 * 1024, "serve: a streaming kernel's weight bytes a CU at least "
                                   "(spreads a memory-bound kernel over CUs)", min=1),
        "step_map_seconds": Field("time", 60.0, "serve: the MILP's time limit for an anchor's plan", min=0.01,
                                  unit="s"),
        "step_cache": Field("str", "", "serve: a directory of simulated anchors (one file each) that runs, their "
                            "workers and a sweep's points share, each anchor simulated once "
                            "(sim/workloads/serve/cache.py); empty: none",
                            file=True),
        "step_workers": Field("int", 0, "serve: processes simulating anchors side by side, ahead of need, from a "
                              "planning pass at the roofline (sim/workloads/serve/prefetch.py; the same prices); "
                              "0: OMP_NUM_THREADS if set (1 in a Ray task or actor), else this machine's cores; "
                              "1: each when a step needs it", min=0),
        "looping": Field("bool", True, "serve: the layers run as one looped kernel call (Kernel Looping, "
                         "Koeplinger et al. 2024); false: the unlooped baseline, a kernel call a layer (its "
                         "pipeline filled and drained each layer, and call_sync)"),
        "kv_reservation": Field("choice", "paged", "serve: the KV memory a request reserves when admitted "
                                "(sim/workloads/serve/reservation.py; vLLM's baselines, Kwon et al., SOSP 2023): paged "
                                "(its blocks as it grows), max (max_model_len tokens: Orca (Max)), pow2 (the prompt "
                                "and the output rounded up to a power of two: Orca (Pow2)), exact (the prompt and the "
                                "exact output: Orca (Oracle)); a reserving request is admitted only when all of it "
                                "fits", choices=RESERVATIONS),
        "max_model_len": Field("int", MAX_MODEL_LEN, "serve: kv_reservation = \"max\": the tokens every request "
                               "reserves, the model's maximum sequence length the server allows (2,048: Orca (Max) "
                               "in the vLLM paper, section 6.1); a longer request is refused", min=1),
        "step_roofline": Field("bool", False, "serve: every step priced at its roofline (efficiency 1), no anchor "
                               "simulated: for questions of admission and batching, not of the plans' speed"),
        "call_sync": Field("time", CALL_SYNC, "serve: looping = false: a kernel call's synchronisation at each layer "
                           "boundary (chosen, not published: sim/workloads/serve/costs.py)", min=0.0, unit="s"),
        "speculative": Table({
            "draft": Field("choice", "none", "serve: speculative decoding's draft model, by its published "
                           "configuration (mapping/models.py; sim/workloads/serve/speculative.py); none: off",
                           choices=("none", *MODELS)),
            "k": Field("int", 4, "serve: draft tokens a sequence a step (its verify step checks k + 1); 0: off",
                       min=0, max=16),
            "acceptance": Field("choice", "geometric", "serve: the drafts' acceptance distribution: geometric "
                                "(Leviathan et al. 2023, each accepted with probability alpha) or published "
                                "per-position rates (sim/workloads/serve/speculative.py)", choices=ACCEPTANCE),
            "alpha": Field("float", 0.7, "serve: geometric acceptance: each draft's probability of acceptance "
                           "(chosen, not published)", min=0.0, max=0.99),
        }, doc="speculative decoding: a draft model proposes, the served model verifies"),
    }, doc="kv-decode, spec-decode and serve")

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "ServeParams":
        spec, lay = chip.on_chip()
        model = MODELS[d["model"]]
        sched = tile_of(d["scheduler_tile"], "workload.decode.scheduler_tile", spec, lay, CU, issues)
        if not spec.tiers:
            issues.append(Issue("workload.decode.model", f"chip {spec.name!r} has no memory tiers: {model.name}'s "
                                "weights live in one (use chip.preset = \"sn40l\")"))
        elif model.weight_bytes > spec.tiers[0].capacity:
            t = spec.tiers[0]
            issues.append(Issue("workload.decode.model", f"{model.name}'s {model.weight_bytes / 1e9:.1f} GB of weights "
                                f"do not fit {spec.name}'s {t.capacity / 1e9:.0f} GB of {t.name}: serve it on a "
                                "system of sockets (tensor parallel)"))
        trace = trace_of(d, spec.clock_hz, issues)
        prefix_block_issues(d, trace, issues)
        if not d["trace"] and d["requests"] < 1:
            issues.append(Issue("workload.decode.requests", "must be at least 1 (0 means all of a trace)"))
        return cls(kind, model, len(trace.arrivals) if trace else d["requests"], d["max_sequences"],
                   d["max_step_tokens"], d["chunk_tokens"],
                   dist_of(d["prompt_tokens"], "workload.decode.prompt_tokens", issues),
                   dist_of(d["output_tokens"], "workload.decode.output_tokens", issues), d["arrival_interval"],
                   tile_id(sched, spec), trace, d["slo_ttft"] or 0.0, d["slo_tbt"] or 0.0,
                   cost_options(d), spec.tiers[0].name if spec.tiers else "",
                   round(d["trace_jitter"] * spec.clock_hz / d["trace_speedup"]) if trace else 0,
                   d["prefix_block_tokens"], kv_reservation=d["kv_reservation"], max_model_len=d["max_model_len"],
                   speculative=speculative_of(d["speculative"], MODELS, model, issues))

    @property
    def work_items(self) -> int:
        return self.requests

    def program(self, cfg):
        from sim.workloads.serve.scheduler import Serving

        return Serving(self, cfg)

    def figures(self, logged: list, clock_hz: float) -> tuple[dict, dict]:
        from sim.workloads.serve.figures import serve_figures

        return serve_figures(self, logged, clock_hz)

    def serving_figures(self, logged: list, clock_hz: float, seconds: float) -> tuple[dict, dict]:
        reqs = [x for x in logged if isinstance(x, RequestLog)]
        moves = [x for x in logged if isinstance(x, PreemptionLog)]
        summary, tables = serving_figures(reqs, moves, clock_hz, seconds, Objectives(self.slo_ttft, self.slo_tbt))
        return {**summary, **prompt_figures(reqs), **batch_figures(logged),
                "tpot_p50_seconds": tpot_p50(reqs, clock_hz)}, tables

    def priced_actions(self, logged: list):
        from sim.workloads.serve.figures import priced_actions

        return priced_actions(logged, self.tier)

    def priced_memory(self, logged: list):
        from sim.workloads.serve.figures import step_memory

        return step_memory(logged, self.tier)

    def input_figures(self, cfg) -> dict:
        return KvParams.input_figures(self, cfg)  # type: ignore[arg-type]  # the same trace fields


def tpot_p50(reqs: list[RequestLog], clock_hz: float) -> float | None:
    """The median over served requests of (last token - first) / (tokens - 1), s (None: no such request)."""
    per = sorted((r.token_cycles[-1] - r.token_cycles[0]) / (len(r.token_cycles) - 1) / clock_hz
                 for r in reqs if r.status == SERVED and len(r.token_cycles) > 1)
    if not per:
        return None
    mid = len(per) // 2
    return per[mid] if len(per) % 2 else (per[mid - 1] + per[mid]) / 2


def cost_options(d: dict) -> CostOptions:
    """How a serve run's steps are priced, from its [workload.decode] table."""
    return CostOptions(ratio=d["step_anchor_ratio"], context_ratio=d["step_context_ratio"], tiles=d["step_tiles"],
                       stream_bytes=d["step_stream_bytes"], map_seconds=d["step_map_seconds"], cache=d["step_cache"],
                       workers=d["step_workers"], looping=d["looping"], call_sync_seconds=d["call_sync"],
                       roofline_only=d["step_roofline"])

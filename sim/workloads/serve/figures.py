"""A serve run's records and figures: one row per step (run_steps) and per anchor (run_anchors).

Steps are the scheduler's decisions with their priced durations (hashed: they are what the run
did); anchors are the plans simulated to price them, with the wall time each took (a view:
not hashed, the steps they priced are).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from typing import ClassVar

from sim.chip.records import column
from sim.serving.prefix_sharing import PrefixLog, prefix_figures


@dataclass(frozen=True, slots=True)
class StepLog:
    """A row of run_steps (its columns are declared here, once)."""

    step: int = column("int64", "step number")
    start: int = column("int64", "cycle it started")
    end: int = column("int64", "cycle it ended (start + its priced cycles)")
    decode: int = column("int64", "sequences that decoded a token in it")
    prefill_tokens: int = column("int64", "prompt tokens it prefilled (chunks)")
    tokens: int = column("int64", "tokens through the weights: decode + prefill_tokens")
    keys: int = column("int64", "query-key pairs per head its attention computed")
    kv_read: int = column("int64", "cached tokens whose K and V it read, per layer")
    made: int = column("int64", "tokens it generated (decode tokens and first tokens of finished prompts)")
    read_bytes: int = column("int64", "bytes it read from the first memory tier: weights, cached K/V, "
                             "embedding rows, the output head (priced, not simulated)")
    written_bytes: int = column("int64", "bytes it wrote there: its tokens' new K and V")
    flops: int = column("int64", "its FLOPs: every layer's kernels and the output head")

    HASHED: ClassVar[bool] = True

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class AnchorLog:
    """A row of run_anchors: a step shape whose plan was mapped and simulated to price steps."""

    tokens: int = column("int64", "the anchor's tokens a step")
    keys: int = column("int64", "its query-key pairs per head")
    kv_read: int = column("int64", "its cached tokens read per layer")
    tiles: int = column("int64", "tiles a layer of its plan (1 when memory-bound)")
    cus: int = column("int64", "CUs its plan's kernels use")
    iterations: int = column("int64", "iterations (layer x tile) its looped run simulated")
    cycles: int = column("int64", "simulated cycles of that run")
    per_iteration_cycles: float = column("double", "cycles an iteration adds in the loop's steady state")
    roofline_layer_cycles: float = column("double", "one layer at the roofline (its plan's bytes and FLOPs), cycles")
    step_cycles: float = column("double", "its step's cycles over the model's layers (extrapolated)")
    roofline_cycles: float = column("double", "the model's layers at the roofline, cycles")
    efficiency: float = column("double", "step_cycles / roofline_cycles: what every step it prices is charged")
    messages: int = column("int64", "messages its run sent")
    plan_status: str = column("string", "the MILP's: optimal or feasible")
    wall_seconds: float = column("double", "wall time its mapping, placement and simulation took, s (0: cached)")
    cached: bool = column("bool", "taken from workload.decode.step_cache, not simulated by this run")
    key: str = column("string", "its key in a step cache (sim/workloads/serve/cache.py)")
    ahead: bool = column("bool", "simulated ahead of need in a worker process, from the run's planning pass "
                         "(sim/workloads/serve/prefetch.py); wall_seconds is that process's")
    used: bool = column("bool", "a step of the run was priced by it (false: the planning pass foresaw it, no step "
                        "needed it)")
    mu_peak: float = column("double", "largest share of the chip's MU bytes its run held live data in at once")
    mu_mean: float = column("double", "time-averaged share of the chip's MU bytes its run held live data in")
    mu_reserved_peak: float = column("double", "largest share of the chip's MU bytes its run's buffers reserved")
    mu_reserved_mean: float = column("double", "time-averaged share of the chip's MU bytes its run's buffers "
                                     "reserved")
    tier_bytes: int = column("int64", "bytes its run read and wrote in the first memory tier")
    tier_flows: int = column("int64", "flows its run moved those bytes in")

    HASHED: ClassVar[bool] = False  # a view, and a wall time: the steps it priced are in the hash

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class SpecStepLog:
    """A step's speculative decoding (speculative.py; logged only when it is on): its drafts, what the
    verify step accepted, and the rejected drafts' KV reclaimed."""

    step: int = column("int64", "step number (run_steps')")
    sequences: int = column("int64", "decode sequences it verified")
    drafted: int = column("int64", "draft tokens they proposed")
    accepted: int = column("int64", "of them, accepted")
    rejected: int = column("int64", "of them, rejected (drafted - accepted)")
    expected_tokens: float = column("double", "tokens the sequences make on average (closed form: 1 + sum of "
                                    "P(a >= i) a sequence)")
    draft_cycles: int = column("int64", "cycles of the draft model's steps before the verify step")
    reclaimed_bytes: int = column("int64", "KV bytes the rejected drafts wrote and gave back (both models' caches)")
    freed_bytes: int = column("int64", "of the tier's pages, bytes given back after it (whole pages)")

    HASHED: ClassVar[bool] = True

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class StepAnchor:
    """Which anchor priced the steps of one shape (a view: the steps' cycles are in the hash)."""

    tokens: int
    keys: int
    kv_read: int
    anchor: tuple[int, int, int]  # the anchor's tokens, keys and kv_read (an AnchorLog's)

    HASHED: ClassVar[bool] = False

    def row(self) -> tuple:
        return astuple(self)


@dataclass(frozen=True, slots=True)
class StepFailure:
    """A step whose plan could not be mapped, placed or simulated: the run stops there."""

    step: int
    reason: str

    def row(self) -> tuple:
        return astuple(self)


def _columns(rows: list, record: type) -> dict:
    return {f.name: [getattr(r, f.name) for r in rows] for f in fields(record)}


def priced_actions(logged: list, tier: str):
    """The actions a serve run's steps priced (their tier bytes and FLOPs: a lane-cycle of a stage
    is one fused multiply-add, 2 FLOPs); their on-chip MU and NoC traffic is not counted."""
    from sim.energy.counts import ActionCounts

    steps = [x for x in logged if isinstance(x, StepLog)]
    if not steps:
        return None
    fields_ = {"cu_fu_ops": sum(s.flops for s in steps) // 2,
               f"{tier}_read_bytes": sum(s.read_bytes for s in steps),
               f"{tier}_write_bytes": sum(s.written_bytes for s in steps)}
    return ActionCounts(**{k: v for k, v in fields_.items() if k in ActionCounts.__dataclass_fields__})


def step_memory(logged: list, tier: str):
    """What a serve run's steps held in the MUs and moved through ``tier`` (a PricedMemory; None
    without steps): each step holds what its anchor's run held, so the peaks are the largest of the
    steps' anchors' and the means are weighted by each step's cycles (fragmentation: 1 - the
    weighted used over the weighted reserved, as a simulated run's, sim/chip/report.py); the bytes
    are the steps' own, in as many flows as their anchor moved that many bytes in. None also when a
    step's anchor is not in ``logged``."""
    from sim.chip.priced_memory import PricedMemory, TierTraffic

    steps = [x for x in logged if isinstance(x, StepLog)]
    if not steps:
        return None
    priced_by = {(x.tokens, x.keys, x.kv_read): x.anchor for x in logged if isinstance(x, StepAnchor)}
    anchors = {(a.tokens, a.keys, a.kv_read): a for a in logged if isinstance(a, AnchorLog) and a.used}
    found = [anchors.get(priced_by.get((s.tokens, s.keys, s.kv_read), (-1, -1, -1))) for s in steps]
    of = [a for a in found if a is not None]
    if len(of) < len(steps):  # a step whose anchor was not logged: no figure rather than a wrong one
        return None
    span = sum(s.end - s.start for s in steps)
    used = sum((s.end - s.start) * a.mu_mean for s, a in zip(steps, of))
    reserved = sum((s.end - s.start) * a.mu_reserved_mean for s, a in zip(steps, of))
    flows = sum(-(-(s.read_bytes + s.written_bytes) * a.tier_flows // a.tier_bytes) if a.tier_bytes else 0
                for s, a in zip(steps, of))
    traffic = TierTraffic(sum(s.read_bytes for s in steps), sum(s.written_bytes for s in steps), flows)
    return PricedMemory(max(a.mu_peak for a in of), used / span if span else 0.0,
                        max(a.mu_reserved_peak for a in of), 1.0 - used / reserved if reserved > 0 else 0.0,
                        {tier: traffic})


def serve_figures(params, logged: list, clock_hz: float) -> tuple[dict, dict]:
    """The summary's serve figures and the run_steps and run_anchors columns."""
    steps = [x for x in logged if isinstance(x, StepLog)]
    cycles = [s.end - s.start for s in steps]
    failure = next((x.reason for x in logged if isinstance(x, StepFailure)), None)
    anchors, cols = anchor_figures(params, logged)
    summary = {
        "model": params.model.name,
        "serve_steps": len(steps),
        "step_mean_seconds": sum(cycles) / len(cycles) / clock_hz if cycles else None,
        "prefill_tokens": sum(s.prefill_tokens for s in steps),
        **anchors,
        "step_error": failure,
        **prefix_figures([x for x in logged if isinstance(x, PrefixLog)]),
        **speculative_figures(params, [x for x in logged if isinstance(x, SpecStepLog)], clock_hz),
    }
    return summary, {"steps": _columns(steps, StepLog), **cols}


def speculative_figures(params, logs: list[SpecStepLog], clock_hz: float) -> dict:
    """The summary's speculative-decoding figures (none when it is off: the summary stays as it was)."""
    spec = getattr(params, "speculative", None)
    if spec is None:
        return {}
    seqs = sum(x.sequences for x in logs)
    return {"spec_draft_model": spec.draft.name, "spec_k": spec.k, "spec_acceptance": spec.acceptance,
            "spec_drafted": sum(x.drafted for x in logs), "spec_accepted": sum(x.accepted for x in logs),
            "spec_rejected": sum(x.rejected for x in logs),
            "spec_tokens_per_step": (sum(x.accepted for x in logs) + seqs) / seqs if seqs else None,
            "spec_expected_tokens_per_step": sum(x.expected_tokens for x in logs) / seqs if seqs else None,
            "spec_draft_seconds": sum(x.draft_cycles for x in logs) / clock_hz,
            "kv_bytes_reclaimed": sum(x.reclaimed_bytes for x in logs),
            "kv_bytes_freed": sum(x.freed_bytes for x in logs)}


def anchor_figures(params, logged: list) -> tuple[dict, dict]:
    """The summary's anchor figures and the run_anchors columns (the anchors this run simulated
    are in its step cache already: cache.once stores each as it is simulated)."""
    logs = [x for x in logged if isinstance(x, AnchorLog)]
    anchors = [a for a in logs if a.used]
    return {"anchors": len(anchors), "anchors_cached": sum(a.cached for a in anchors),
            "anchors_unused": len(logs) - len(anchors), "anchor_wall_seconds": sum(a.wall_seconds for a in logs),
            "anchor_efficiency_min": min((a.efficiency for a in anchors), default=None),
            "anchor_efficiency_max": max((a.efficiency for a in anchors), default=None)}, \
        {"anchors": _columns(logs, AnchorLog)}

"""The serving scheduler on one chip: batcher.py's decisions on the scheduler CU (its backend
here), with the KV caches in the chip's first memory tier.

What is simulated cycle by cycle: the scheduler's decisions and time; every KV region's pages at
the tier's controller (sim/chip/tier_controller.py: real messages that allocate, grow, refuse and free
them, a page at a time); a swap as a copy between tiers, a flow on both tiers' channels. What
is priced: each step's duration (costs.py: its roofline times the efficiency of its anchor, a
plan mapped and simulated cycle by cycle on this chip), a Sleep of that many cycles. The step's
own weight and KV traffic is inside the price, not replayed in the tier's flows, so a swap's
copy does not slow a concurrent step down.
"""

from __future__ import annotations

from dataclasses import replace

from sim.chip import messages as m
from sim.chip.spec import tier_unit
from sim.chip.units import ComputeUnit, Replies, Sleep
from sim.serving.requests import Requests
from sim.workloads import Task
from sim.workloads.base import Floorplan
from sim.workloads.serve.batcher import Batcher, Sequence
from sim.workloads.serve.costs import StepCosts
from sim.workloads.serve.progress import ProgressSink
from sim.workloads.serve.shapes import StepShape


class Serving(Requests):
    """The program of a serve run's CUs: the scheduler's task on its CU, nothing on the others. Its
    requests (lengths, arrivals) are drawn or read from the trace exactly as kv-decode's."""

    def __init__(self, p, cfg) -> None:
        self.p = p
        self.cfg = cfg
        spec = cfg.spec
        self.scheduler = Floorplan(cfg).unit_at(*divmod(p.scheduler_tile, spec.cols))
        self.tier = tier_unit(spec, spec.tiers[0].name)
        self.swap_tier = tier_unit(spec, spec.tiers[1].name) if len(spec.tiers) > 1 else -1
        self.share_prefixes(cfg.prefix_sharing)
        self.backend: ChipBackend | None = None  # the scheduler CU's, once started
        self.batcher: Batcher | None = None  # the scheduler on it
        self.sink: ProgressSink | None = None

    def watch(self, sink: ProgressSink) -> None:
        """Tell ``sink`` how the run goes (progress.py): its steps and its anchors."""
        self.sink = sink
        if self.batcher is not None and self.backend is not None:
            self.batcher.progress = self.backend.costs.sink = sink

    def start(self, cu: ComputeUnit):
        if cu.uid != self.scheduler:
            return None
        self.backend = ChipBackend(self, cu)
        tier = self.cfg.spec.tiers[0]
        spec = self.p.speculative  # the draft model's KV cache beside the served model's, a token for a token
        kv = self.p.model.kv_bytes_per_token + (spec.draft.kv_bytes_per_token if spec else 0)
        self.batcher = Batcher(self.p, self.cfg, self, self.backend, int(tier.capacity // tier.page_bytes),
                               tier.page_bytes, kv, swap=self.swap_tier >= 0,
                               on_step=cu.shard.log if self.cfg.trace else None, drafting=self.backend)
        self.batcher.progress = self.sink
        return self.batcher.run()

    def on_message(self, cu, msg):
        raise RuntimeError(f"serve CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")


def planned_anchors(cfg) -> list[StepShape]:
    """The anchors a serve run of ``cfg`` (a ChipConfig) asks for with every step at its roofline,
    in the order its steps first need them (the whole chip in one shard, nothing recorded): the
    planning pass of prefetch.py."""
    from sim.chip.shard import ChipShard
    from sim.noc.topology import Region

    p = cfg.workload
    plan = replace(cfg, workload=replace(p, costs=replace(p.costs, roofline_only=True)), trace=False)
    prog = Serving(plan.workload, plan)
    ChipShard(plan, Region(0, cfg.spec.rows, 0, cfg.spec.cols), prog).advance(0, plan.max_cycles)
    return list(prog.backend.costs.wanted) if prog.backend is not None else []


class ChipBackend:
    """The batcher's backend on the scheduler CU (a StepBackend): its KV pages at the first tier's
    controller, a step a priced Sleep."""

    keeps_batch_log = True  # the chip's batch figures (batch_max, batch_mean, kv_used_share) come from them

    def __init__(self, prog: Serving, cu: ComputeUnit):
        self.prog = prog
        self.p = prog.p
        self.page = prog.cfg.spec.tiers[0].page_bytes
        self.cu = cu
        self.shard = cu.shard
        self.unit = cu.uid
        cfg = prog.cfg
        self.costs = StepCosts(cfg, prog.p.model, prog.p.costs, planner=lambda: planned_anchors(cfg), sink=prog.sink)
        spec = prog.p.speculative  # the draft model's steps: priced alike, from its own anchors
        self.draft_costs = StepCosts(cfg, spec.draft, prog.p.costs, sink=prog.sink) if spec else None

    @property
    def now(self) -> int:
        return self.shard.now

    def sleep(self, cycles: int) -> Task:
        yield Sleep(cycles)

    def _ask(self, unit: int, op: int, **fields) -> Task:
        """Task: one control request to a tier's controller; its reply."""
        tag = self.cu.request(m.CONTROL, unit, arg=op, **fields)
        got = yield Replies([tag], "memory")
        return got[tag]

    def load_weights(self) -> Task:
        """The model's weights (and a draft model's) take their pages in the first tier (they live there
        for the run)."""
        nbytes = self.p.model.weight_bytes + (self.p.speculative.draft.weight_bytes if self.p.speculative else 0)
        r = yield from self._ask(self.prog.tier, m.CTRL_TIER_ALLOC, nbytes=nbytes)
        return r.status == m.STATUS_OK

    def take_pages(self, wants: list, free: int) -> Task:
        """Every region grows by its pages at once (a region not yet taken is allocated); the tier
        keeps its own books (``free`` is the batcher's)."""
        tags = []
        for region, pages in wants:
            nbytes = pages * self.page  # whole pages: the tier gives no less
            if region.region < 0:
                tags.append(self.cu.request(m.CONTROL, self.prog.tier, arg=m.CTRL_TIER_ALLOC, nbytes=nbytes))
            else:
                tags.append(self.cu.request(m.CONTROL, self.prog.tier, arg=m.CTRL_TIER_GROW, buf=region.region,
                                            nbytes=nbytes))
        got = yield Replies(tags, "memory")
        oks = []
        for tag, (region, _) in zip(tags, wants):
            oks.append(got[tag].status == m.STATUS_OK)
            if oks[-1]:
                region.region = got[tag].buf
        return oks

    def free_pages(self, region) -> Task:
        """Free the region (waiting for the controller: the pages are free when it answers)."""
        if region.region >= 0:
            yield from self._ask(self.prog.tier, m.CTRL_TIER_FREE, buf=region.region)

    def trim_pages(self, cuts: list) -> Task:
        """Each region keeps its first pages only. The tier's regions grow and are freed whole
        (sim/chip/tier_controller.py has no shrink), so a cut is the region freed and its kept pages
        taken again in the same exchange: the pool's books then hold what a block table truncated to the
        accepted length holds (vLLM frees a sequence's blocks past its tokens); no KV moves."""
        frees = [self.cu.request(m.CONTROL, self.prog.tier, arg=m.CTRL_TIER_FREE, buf=q.region) for q, _ in cuts]
        yield Replies(frees, "memory")
        kept = [(q, self.cu.request(m.CONTROL, self.prog.tier, arg=m.CTRL_TIER_ALLOC, nbytes=pages * self.page))
                for q, pages in cuts if pages]
        for q, _ in cuts:
            q.region = -1
        got = (yield Replies([tag for _, tag in kept], "memory")) if kept else {}
        for q, tag in kept:
            assert got[tag].status == m.STATUS_OK, "pages just freed were refused"
            q.region = got[tag].buf

    def swap_out(self, q: Sequence, nbytes: int) -> Task:
        r = yield from self._ask(self.prog.swap_tier, m.CTRL_TIER_ALLOC, nbytes=nbytes)
        if r.status != m.STATUS_OK:
            return False
        q.swapped = r.buf
        yield from self._ask(self.prog.tier, m.CTRL_COPY, buf=self.prog.swap_tier, nbytes=nbytes)
        return True

    def swap_back(self, q: Sequence, nbytes: int) -> Task:
        yield from self._ask(self.prog.swap_tier, m.CTRL_COPY, buf=self.prog.tier, nbytes=nbytes)
        yield from self._ask(self.prog.swap_tier, m.CTRL_TIER_FREE, buf=q.swapped)

    def execute(self, shape: StepShape, step: int) -> Task:
        """The step: its price in cycles, slept (costs.py)."""
        cycles, roof = self.costs.price(shape)
        yield Sleep(cycles)
        return roof

    def execute_draft(self, shape: StepShape, step: int) -> Task:
        """A draft model's step: its price in cycles (its own anchors), slept."""
        assert self.draft_costs is not None
        cycles, roof = self.draft_costs.price(shape)
        yield Sleep(cycles)
        return roof

    def count(self, what: str) -> None:
        self.shard.counts[what] += 1

    def record_step(self, step: int, start: int, made: int) -> None:
        self.shard.record("step", step, start, self.now, made, "ok")

    def record_request(self, q: Sequence, status: str) -> None:
        self.shard.record("request", q.seq, q.arrival, self.now, q.made, status)

    def log(self, record) -> None:
        self.shard.log(record)

    def finished(self, steps: int) -> None:
        for log in self.costs.finish():
            self.shard.log(log)
        if self.draft_costs is not None:
            for log in self.draft_costs.finish():
                self.shard.log(log)

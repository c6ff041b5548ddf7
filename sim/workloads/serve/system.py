"""A model served by a system of sockets with tensor parallelism: ``workload.kind = "serve-system"``.

The system is box chips (sim/system) joined by the [system]'s network, one tensor-parallel
group of them (the dimension whose parallelism is TP). Each chip holds a Megatron-LM slice of
the model (``ModelSpec.tp_slice``: a 1/tp share of the heads, the MLP and the vocabulary;
the KV heads split, or shared by tp / kv_heads chips when fewer) and its share of every
sequence's KV cache.

The first chip of the group runs the scheduler (batcher.py, the same decisions as on one
chip), its KV books kept for every chip at once (all hold the same share of each sequence:
the socket's HBM less its weights, in its pages; no swap tier: preemption recomputes). A step
is the chips' work and their collectives, simulated as messages over the system's links:

- the scheduler sends every other chip the step's command (64 bytes; the simulator hands the
  step's priced durations over with it, as every chip runs the same slice);
- every chip, layer by layer, computes its attention share, all-reduces the step's tokens'
  hidden states with the group (the algorithm of least alpha-beta time for the step's bytes on
  the dimension's links: sim/system/algorithms.py), computes its MLP
  share and all-reduces again (Megatron's two all-reduces a layer); then its share of the
  output head;
- a chip's compute durations are priced as on one chip (costs.py): the slice's step on the
  socket's grid (the [chip], its NoC and memory policy), mapped, kernel-looped and simulated
  cycle by cycle for the anchors, split between attention and MLP by their rooflines.

What is simulated cycle by cycle: the scheduler's time, every command and every all-reduce
chunk on the links (ports, serialisation, latency, contention). What is priced: each chip's
compute of a layer half and of the head. With ``collectives = "closed-form"`` the links carry
nothing: each step's all-reduces are priced by their alpha-beta form (the algorithm chosen by
size, as with messages) and the scheduler chip sleeps the step's whole time, alone; the followers
run nothing. A TP group's all-reduces share the links with nothing but themselves, so the two
agree within the closed forms' 1.3 % (measured on 4 chips: 800 cycles in a 9.7 M-cycle step);
the messages cost a wall second per 0.02 simulated s for Llama-3.1-70B on 16 sockets.
Not modelled: the gather of the sampled tokens after the head, pipeline parallelism, several
TP groups (data parallel replicas).

Its anchors are planned ahead as a chip run's (prefetch.py): ``planned_anchors`` replays the
scheduler alone with every step at its roofline and its all-reduces at their closed form (no
messages), and the slice's anchors its steps ask for are simulated side by side in worker
processes; the steps still price from the same anchors, so the result hash is unchanged.

Serving metrics come from the scheduler chip's records (``system_figures``): the same
TTFT/TBT/e2e percentiles and goodput as a chip run's (sim/serving/metrics.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from mapping.generators.serve import layer_kernels
from mapping.models import MODELS, ModelSpec
from mapping.systems import Parallelism
from sim.keys import Field, Issue, Table
from sim.serving.lengths import dist_of
from sim.serving.metrics import Objectives, PreemptionLog, RequestLog, prompt_figures, serving_figures
from sim.serving.prefix_sharing import PrefixLog, prefix_figures
from sim.serving.requests import Requests, prefix_block_issues, trace_of
from sim.system.algorithms import PortTiming
from sim.system.collectives import all_reduce
from sim.system.shard import BoxChip, Compute, Recv, SystemShard
from sim.system.shard import Sleep as BoxSleep
from sim.workloads import WORKLOADS, ChipContext, Task
from sim.workloads.capabilities import Capabilities
from sim.workloads.kv_decode import KvParams
from sim.workloads.serve.batcher import Batcher, Sequence
from sim.workloads.serve.costs import StepCosts
from sim.workloads.serve.figures import AnchorLog, StepLog, anchor_figures, priced_actions, step_memory
from sim.workloads.serve.params import ServeParams, cost_options
from sim.workloads.serve.progress import ProgressSink
from sim.workloads.serve.shapes import StepShape

COLLECTIVES = ("messages", "closed-form")  # how a step's all-reduces are simulated (workload.decode.collectives)
COMMAND_BYTES = 64  # a step's command from the scheduler to a chip
COMMAND = 1 << 44  # tag space of commands (collectives' tags count up from 1, times 4096 steps)
STOP = -1  # a command's first integer: no more steps


@WORKLOADS.register("serve-system")
@dataclass(frozen=True)
class ServeSystemParams(ServeParams):
    kind: str = "serve-system"
    tp: int = 1  # chips of the tensor-parallel group
    dim: int = 0  # the network dimension carrying it
    whole: ModelSpec | None = None  # the model before slicing (``model`` is one chip's slice)
    collectives: str = "messages"  # every chunk on the links, or each step's all-reduces at their closed form

    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=True, maps_graph=False, socket=True, preempts=True)
    TABLES: ClassVar[tuple[str, ...]] = ("run_requests", "run_anchors")  # its steps are system_steps' rows
    KEYS: ClassVar[Table] = Table({
        **ServeParams.KEYS.fields,
        "collectives": Field("choice", "messages", "serve-system: messages: every step's command and all-reduce "
                             "chunk simulated on the links (ports, serialisation, contention); closed-form: each "
                             "step's all-reduces priced by their alpha-beta form (sim/system/algorithms.py, within "
                             "1.3 % of the messages alone on the group's links) and slept on the scheduler chip, "
                             "no messages: an hour of trace in minutes", choices=COLLECTIVES),
    }, doc=ServeParams.KEYS.doc)

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "ServeSystemParams":
        system, spec = chip.system, chip.spec
        assert system is not None
        dims = [i for i, n in enumerate(system.network) if n.parallelism is Parallelism.TP]
        whole = MODELS[d["model"]]
        if len(dims) != 1 or system.network[dims[0]].size != system.chips:
            issues.append(Issue("system.network", "serve-system runs one tensor-parallel group of every chip: give "
                                "one [[system.network]] with parallelism = \"TP\" and size = system.chips"))
            return cls()
        if d["speculative"]["draft"] != "none" and d["speculative"]["k"]:
            issues.append(Issue("workload.decode.speculative", "speculative decoding runs in serve (one socket), "
                                "not serve-system"))
        tp = system.chips
        try:
            part = whole.tp_slice(tp)
        except ValueError as exc:
            issues.append(Issue("workload.decode.model", str(exc)))
            return cls()
        if spec is None or not spec.tiers:
            issues.append(Issue("chip.preset", "serve-system prices its sockets' steps on the [chip]'s grid, which "
                                "needs memory tiers (chip.preset = \"sn40l\")"))
            return cls()
        if part.weight_bytes > spec.tiers[0].capacity:
            issues.append(Issue("workload.decode.model", f"{whole.name}'s {part.weight_bytes / 1e9:.1f} GB a chip "
                                f"do not fit {spec.tiers[0].capacity / 1e9:.0f} GB of {spec.tiers[0].name}"))
        trace = trace_of(d, spec.clock_hz, issues)
        prefix_block_issues(d, trace, issues)
        return cls(kind, part, len(trace.arrivals) if trace else d["requests"], d["max_sequences"],
                   d["max_step_tokens"], d["chunk_tokens"],
                   dist_of(d["prompt_tokens"], "workload.decode.prompt_tokens", issues),
                   dist_of(d["output_tokens"], "workload.decode.output_tokens", issues), d["arrival_interval"], 0,
                   trace, d["slo_ttft"] or 0.0,
                   d["slo_tbt"] or 0.0, cost_options(d), spec.tiers[0].name,
                   round(d["trace_jitter"] * spec.clock_hz / d["trace_speedup"]) if trace else 0,
                   d["prefix_block_tokens"], d["kv_reservation"], d["max_model_len"], tp=tp, dim=dims[0], whole=whole,
                   collectives=d["collectives"])

    def system_program(self, cfg) -> "ServeSystem":
        return ServeSystem(self, cfg)

    def program(self, cfg):
        raise TypeError("serve-system runs on a system of chips: give a [system]")

    # a system run has no chip run: none of a serve run's chip figures (system_figures has them)
    def figures(self, logged: list, clock_hz: float) -> tuple[dict, dict]:
        return {}, {}

    def serving_figures(self, logged: list, clock_hz: float, seconds: float) -> tuple[dict, dict]:
        return {}, {}

    def input_figures(self, cfg) -> dict:
        return {}

    def priced_actions(self, logged: list):
        return None

    def system_figures(self, records: list, cfg) -> dict:
        """The serving figures of the scheduler chip's records, and its steps and anchors."""
        summary, _ = self._served(records, cfg)
        mine = [r for r in records if r.chip == 0]
        tokens = sum(1 for r in mine if r.kind == "token")
        prefixes = [PrefixLog(r.ident, int(blocks), int(hits), int(nbytes), r.nbytes)
                    for r in mine if r.kind.startswith("prefix:") for blocks, hits, nbytes in [r.kind.split(":")[1:]]]
        summary.update(model=self.whole.name if self.whole else self.model.name, tp=self.tp,
                       serve_steps=sum(1 for r in mine if r.kind == "step"),
                       anchors=sum(1 for r in mine if r.kind == "anchor"), tokens=tokens,
                       requests_failed=sum(1 for r in mine if r.kind.startswith("request:") and r.kind != "request:ok"),
                       **prefix_figures(prefixes))
        return summary

    def system_views(self, records: list, logged: list, cfg) -> tuple[dict, dict]:
        """The anchors' figures (their wall time, those a step cache gave), the trace's, the energy
        of the steps, and run_requests and run_anchors, as a chip run's."""
        figures, tables = anchor_figures(self, logged)
        del figures["anchors"]  # the hashed count, from the records (system_figures)
        figures.update(KvParams.input_figures(self, cfg))  # type: ignore[arg-type]  # the same trace fields
        figures.update(self._energy(records, logged, cfg))
        figures.update(self._memory(logged))
        kept = {x.request: x for x in logged if isinstance(x, RequestLog)}
        figures.update(prompt_figures(list(kept.values())))
        return figures, {**self._served(records, cfg, kept)[1], **tables}

    def _memory(self, logged: list) -> dict:
        """A chip's MU figures from its steps' anchors (every chip runs the same slice) and the group's
        tier bytes and flows (every chip's), as a serve run's (figures.step_memory)."""
        m = step_memory(logged, self.tier)
        return {} if m is None else m.figures({}, copies=self.tp)

    def _energy(self, records: list, logged: list, cfg) -> dict:
        """The energy of every chip's steps: each its slice's tier bytes and FLOPs, as a serve run's
        (figures.priced_actions); the bytes between chips have no price in the table, so are not in it."""
        from sim.energy.counts import energy as priced
        from sim.energy.counts import summary_figures
        from sim.energy.table import default_table

        acts = priced_actions(logged, self.tier)
        if acts is None:
            return {}
        mine = [r for r in records if r.chip == 0]
        tokens = sum(1 for r in mine if r.kind == "token")
        e = priced(acts.scaled(self.tp), cfg.chip.energy or default_table())
        return {**summary_figures(e, tokens, sum(1 for r in mine if r.kind == "step")),
                "token_unit": self.token_unit}

    def _served(self, records: list, cfg, kept: dict | None = None) -> tuple[dict, dict]:
        """The serving figures and run_requests columns of the scheduler chip's records (``kept``: the
        scheduler's own request logs, by request, for their prompts and prefill cycles)."""
        mine = [r for r in records if r.chip == 0]
        tokens: dict[int, list[int]] = {}
        preempted: Counter[int] = Counter()  # by request: one pass, not one a request (19,366 in the hour)
        for r in mine:
            if r.kind == "token":
                tokens.setdefault(r.ident, []).append(r.end)
            elif r.kind == "preempt":
                preempted[r.ident] += 1
        none = RequestLog(-1, 0, 0, (), 0, "")
        reqs = [RequestLog(r.ident, r.start, r.nbytes, tuple(sorted(tokens.get(r.ident, ()))),
                           preempted[r.ident], r.kind.split(":")[1],
                           (kept or {}).get(r.ident, none).prompt, (kept or {}).get(r.ident, none).prefill_cycles)
                for r in mine if r.kind.startswith("request:")]
        moves = [PreemptionLog(r.ident, 0, "recompute", r.start, r.start, r.end, r.nbytes)
                 for r in mine if r.kind == "preempt"]
        seconds = max((r.end for r in records), default=0) / cfg.clock_hz
        return serving_figures(reqs, moves, cfg.clock_hz, seconds, Objectives(self.slo_ttft, self.slo_tbt))


class ServeSystem(Requests):
    """What every chip of a serve-system run runs: the scheduler on the group's first, steps on all;
    its requests drawn or read from the trace exactly as kv-decode's."""

    BOX_DATA = True  # its commands carry the step's durations (sim/system/shard.py)

    def __init__(self, p: ServeSystemParams, cfg):
        self.p = p
        self.cfg = cfg
        self.graph = cfg.graph
        dim = cfg.system.network[p.dim]
        self.kind = dim.kind
        self.port = PortTiming.of(dim.kind, dim.link_bandwidth, dim.link_latency, cfg.clock_hz, cfg.packet_bytes)
        # one chip's slice on the socket's grid, its anchors foreseen by the planning pass (prefetch.py)
        self.costs = StepCosts(cfg.chip, p.model, p.costs, planner=lambda: planned_anchors(cfg))
        self.share_prefixes(cfg.chip.prefix_sharing)
        self.schedulers: list[Batcher] = []  # this shard's groups' first chips'

    def watch(self, sink: ProgressSink) -> None:
        """Tell ``sink`` how the run goes (progress.py): its steps, the planning pass and its anchors."""
        self.costs.sink = sink
        for s in self.schedulers:
            s.progress = sink

    def start(self, chip: BoxChip):
        group = self.graph.group(chip.cid, self.p.dim)
        if chip.cid == group[0]:
            return self.schedule(SystemBackend(self, chip, group), chip.shard.log if self.cfg.chip.trace else None)
        return self._follow(chip, group) if self.messages else _idle()

    @property
    def messages(self) -> bool:
        """Whether the steps' commands and all-reduces are messages on the links (else priced, closed form)."""
        return self.p.collectives == "messages"

    def schedule(self, backend: "SystemBackend", on_step=None) -> Task:
        """The scheduler of ``backend``'s group, its KV books every chip's."""
        sock = self.cfg.chip.spec.tiers[0]
        self.schedulers.append(Batcher(self.p, self.cfg.chip, self, backend, int(sock.capacity // sock.page_bytes),
                                       sock.page_bytes, self.p.model.kv_bytes_per_token, swap=False,
                                       copies=self.p.tp, on_step=on_step))
        return self.schedulers[-1].run()

    def step_cycles(self, roof, tokens: int, group: int) -> int:
        """A step's cycles on a group of ``group`` chips with every compute at its roofline (E = 1)
        and every collective at its closed form: the planning pass's price of a step."""
        return self.closed_form_cycles((round(roof.layers_cycles / self.p.model.layers), 0, round(roof.head_cycles),
                                        tokens), group)

    def closed_form_cycles(self, plan: tuple[int, ...], group: int) -> int:
        """A step of ``plan`` (a layer's attention and MLP cycles, the head's, the tokens) on a group of
        ``group`` chips with its all-reduces at their closed form (sim/system/algorithms.py, the
        algorithm chosen by size as ``step`` does): the step's command, then each layer's two computes
        and two all-reduces, then the head."""
        attention, mlp, head, tokens = plan
        nbytes = tokens * self.p.model.hidden * self.p.model.word
        reduce = self.port.cycles("all_reduce", self.port.choose("all_reduce", group, nbytes), group, nbytes)
        command = self.port.latency + self.port.ser(COMMAND_BYTES) if group > 1 else 0
        return command + self.p.model.layers * (attention + mlp + 2 * reduce) + head

    def _follow(self, chip: BoxChip, group: list[int]) -> Task:
        """A chip other than the scheduler's: each step as its command says."""
        k = 0
        while True:
            yield Recv([(group[0], COMMAND + k)])
            data = chip.take_data(group[0], COMMAND + k)
            if data[0] == STOP:
                return
            yield from self.step(chip, group, k, data[:4])
            k += 1

    def step(self, chip: BoxChip, group: list[int], k: int, plan: tuple[int, ...]) -> Task:
        """One step on one chip: every layer's two computes and two all-reduces, then the head."""
        attention, mlp, head, tokens = plan
        nbytes = tokens * self.p.model.hidden * self.p.model.word
        algorithm = self.port.choose("all_reduce", len(group), nbytes)  # by size, as a collective library
        layers = self.p.model.layers
        for layer in range(layers):
            for half, cycles in enumerate((attention, mlp)):
                yield Compute(cycles)
                yield from all_reduce(chip, group, nbytes, 1 + (k * layers + layer) * 2 + half, self.kind, algorithm)
        yield Compute(head)


class SystemBackend:
    """The batcher's backend on the group's first chip (a StepBackend): KV books for every chip,
    steps as commands."""

    keeps_batch_log = False  # a system run reports no batch figures: ``log`` drops BatchLog

    def __init__(self, prog: ServeSystem, chip: BoxChip, group: list[int]):
        sock = prog.cfg.chip.spec.tiers[0]
        self.prog = prog
        self.p = prog.p
        self.pages = int(sock.capacity // sock.page_bytes)
        self.page = sock.page_bytes
        self.chip = chip
        self.shard = chip.shard
        self.group = group
        self.unit = chip.cid

    @property
    def now(self) -> int:
        return self.shard.now

    def sleep(self, cycles: int) -> Task:
        yield BoxSleep(cycles)

    def load_weights(self) -> Task:
        """Every chip's slice of the weights takes its pages (books: the chips hold alike)."""
        yield from ()
        return -(-self.p.model.weight_bytes // self.page) <= self.pages

    def take_pages(self, wants: list, free: int) -> Task:
        """Pages from the books, in order, while there are any (the same on every chip)."""
        oks = []
        for _, n in wants:
            oks.append(n <= free)
            free -= n if oks[-1] else 0
        yield from ()
        return oks

    def free_pages(self, region) -> Task:
        yield from ()

    def swap_out(self, q: Sequence, nbytes: int) -> Task:
        """No swap tier: a preempted sequence recomputes (the batcher is built with ``swap`` off)."""
        raise RuntimeError("serve-system has no swap memory")
        yield

    def swap_back(self, q: Sequence, nbytes: int) -> Task:
        raise RuntimeError("serve-system has no swap memory")
        yield

    def execute(self, shape: StepShape, step: int) -> Task:
        cycles, roof = self.prog.costs.price(shape)
        e = cycles / roof.cycles if roof.cycles else 1.0
        layer = e * roof.layers_cycles / self.p.model.layers
        attention = round(layer * _attention_share(self.p.model, self.prog.cfg.chip.spec, shape))
        plan = (attention, round(layer) - attention, round(e * roof.head_cycles), shape.tokens)
        if not self.prog.messages:  # the group's step at its closed form, on this chip alone
            yield BoxSleep(self.prog.closed_form_cycles(plan, len(self.group)))
            return roof
        for c in self.group[1:]:
            self.chip.send(c, COMMAND_BYTES, COMMAND + step, plan)
        yield from self.prog.step(self.chip, self.group, step, plan)
        return roof

    def count(self, what: str) -> None:
        self.shard.counts["created" if what == "admitted" else what] += 1

    def record_step(self, step: int, start: int, made: int) -> None:
        self.shard.record("step", self.chip.cid, step, start, self.now, made)

    def record_request(self, q: Sequence, status: str) -> None:
        for i, t in enumerate(q.token_cycles):
            self.shard.record("token", self.chip.cid, q.seq, q.arrival, t, i)
        self.shard.record(f"request:{status}", self.chip.cid, q.seq, q.arrival, self.now, q.admitted)

    def log(self, record) -> None:
        if isinstance(record, (StepLog, RequestLog)):  # views (hashed as records): energy, prompts, TTFT parts
            self.shard.log(record)
        elif isinstance(record, PreemptionLog) and record.what != "swap-in":
            self.shard.record("preempt", self.chip.cid, record.request, record.start, record.end, record.kv_bytes)
        elif isinstance(record, PrefixLog):  # its blocks and hits in the kind, as a request's status
            self.shard.record(f"prefix:{record.blocks}:{record.hit_blocks}:{record.hit_bytes}", self.chip.cid,
                              record.request, self.now, self.now, record.saved_bytes)

    def finished(self, steps: int) -> None:
        for c in self.group[1:] if self.prog.messages else ():
            self.chip.send(c, COMMAND_BYTES, COMMAND + steps, (STOP,))
        logs = self.prog.costs.finish()  # the anchors (and, views, which priced each step shape)
        # the anchors the steps were priced by (those the planning pass foresaw and none needed: views)
        for i, a in enumerate(x for x in logs if isinstance(x, AnchorLog) and x.used):
            self.shard.record("anchor", self.chip.cid, i, 0, a.cycles, a.tokens)
        for x in logs:
            self.shard.log(x)


class RooflineReplay(ServeSystem):
    """The planning pass's program: the scheduler alone (its shard holds only its chip), on a RooflineBackend."""

    def start(self, chip: BoxChip):
        return self.schedule(RooflineBackend(self, chip, self.graph.group(chip.cid, self.p.dim)))


class RooflineBackend(SystemBackend):
    """The planning pass's backend on the scheduler chip alone: a step its roofline and its
    collectives' closed form (``ServeSystem.step_cycles``), slept; no commands, nothing recorded."""

    def execute(self, shape: StepShape, step: int) -> Task:
        _, roof = self.prog.costs.price(shape)  # roofline_only: the anchor noted, E = 1
        yield BoxSleep(self.prog.step_cycles(roof, shape.tokens, len(self.group)))
        return roof

    def record_step(self, step: int, start: int, made: int) -> None:
        pass

    def record_request(self, q: Sequence, status: str) -> None:
        pass

    def log(self, record) -> None:
        pass

    def finished(self, steps: int) -> None:
        pass


def _idle() -> Task:
    """A chip other than the scheduler's when the steps are priced at their closed form: nothing to run."""
    yield from ()


def planned_anchors(cfg) -> list[StepShape]:
    """The anchors a serve-system run of ``cfg`` (a SystemConfig) asks for with every step at its
    roofline, in the order its steps first need them: its scheduler replayed alone, each step's
    all-reduces at their closed form (the planning pass of prefetch.py). The run's steps take E
    times their roofline and their collectives' contention, so it may batch differently: an anchor
    not foreseen is simulated when a step needs it, one foreseen and never needed is logged unused."""
    p = cfg.workload
    plan = replace(cfg, workload=replace(p, costs=replace(p.costs, roofline_only=True)))
    prog = RooflineReplay(plan.workload, plan)
    scheduler = plan.graph.group(0, p.dim)[0]
    SystemShard(plan.net(), [scheduler], prog, np.zeros(plan.graph.nodes, dtype=np.int64)).advance(0, plan.max_cycles)
    return list(prog.costs.wanted)


def _attention_share(model: ModelSpec, spec, shape: StepShape) -> float:
    """The attention kernels' share of a layer's roofline for the step: how a chip's layer time
    splits between its two all-reduces."""
    bpc = spec.tiers[0].bytes_per_cycle(spec.clock_hz)
    fpc = float(spec.cu_count * spec.cu_flops_per_cycle)
    ks = layer_kernels(model, shape.tokens, max(shape.keys, shape.tokens), shape.kv_read)
    cut = next(i for i, k in enumerate(ks) if k.name == "Norm_2")

    def roof(part):
        return max(sum(k.weight_bytes(model.word) + k.extra_dram_bytes for k in part) / bpc,
                   sum(k.flop for k in part) / fpc)

    a, b = roof(ks[:cut]), roof(ks[cut:])
    return a / (a + b)



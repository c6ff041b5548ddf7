"""dataflow: a DFModel mapping plan executed on the CU/MU grid.

The plan (mapping/) says which kernels run together in each partition and how big every
tile and weight is; the grid placement (mapping/placement.py) puts each kernel on CUs and
each buffer in MUs; the address plan gives every buffer its offset in its MUs
(allocators' static planner). This module turns that into what the units do.

Partitions run one after another, started by a controller (the CU at tile (0, 0)):

1. it allocates the partition's buffers at their MUs (tile buffers: the room for
   ``depth`` tiles, reserved once), asks the DRAM interfaces to stream the weights in,
   shares every buffer's reference with the CUs that use it (under the run's reclamation
   protocol) and drops its own, then tells every CU of the partition to start;
2. each CU runs its kernel's slice as a software pipeline over the partition's tiles:
   read the operand tiles (a read of a tile buffer waits at the MU until the writer has
   written that tile: data-flow synchronisation; weights likewise until they are loaded;
   spilled tensors, streamed weights (a slice per tile) and extra DRAM traffic come from
   the DRAM interfaces, interleaved), keep asking for the operands of the tiles ahead (two
   tiles' requests in flight, like a DMA engine's queue), compute for ``FLOPs / (CUs x 2 x lanes
   x stages)`` cycles (a lane x stage unit retires a fused multiply-add per cycle), write
   its share of the output tile to its stripes (after a credit says the reader is done with
   the slot ``depth`` tiles back: flow control) or to DRAM for a spilled tensor;
3. a CU done with every tile (and whose last tiles have been read) drops its references
   and reports; the partition ends when every CU has, and the protocol frees the buffers.

Every message travels the run's NoC model. A graph pass is the partitions in order; the
run makes ``passes`` of them. Reported beside each partition: DFModel's analytic time and
which of its terms (compute, memory, network) bounds it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mapping.chips import ChipSpec
from mapping.placement import GEMM_KINDS, GridPlacement, MuRoom, PlacementError, place_on_grid, share
from mapping.plan import MappingPlan
from mapping.systems import System
from sim.chip import messages as m
from sim.chip.collectives import SIMULATED, collective
from sim.chip.exchange import exchange, exchange_counts, fixed_slots, is_landing, take_landing_reference, token_owners
from sim.chip.records import KernelRecord, PartitionRecord, buffer_label
from sim.chip.references import allocate_many, drop, received
from sim.chip.references import share as share_refs
from sim.chip.units import Compute, ComputeUnit, Replies
from sim.keys import Field, Issue, Table
from sim.workloads import WORKLOADS, ChipContext, Task, Workload
from sim.workloads.moe import route as moe_route

WEIGHT = buffer_label(5, "weight")
TILES = buffer_label(6, "tiles")
CACHED = buffer_label(7, "cache")
CREDIT = 1 << 62  # tag space of flow-control credits (request tags count up from 1)
CACHE = 1 << 40  # REFERENCE tags of cache stripes (partition buffers' tags stay below)
PREFETCH = 2  # tiles whose operands a CU has asked for at once (the one it waits for and the next)
PARTIALS = 4  # tiles of partial sums a CU holds while its peers reduce them (a kernel with collectives)
SIGNAL = 1 << 60  # tag space of a CU's tasks signalling each other
WRITTEN, FREED = 1, 2  # a tile's reduction is written: for the next tile's writer, for the compute loop
DRAM_INTERLEAVE = 2048  # bytes a transfer puts on each DRAM interface at least (a packet's data)
LOAD_CHUNK = 16384  # bytes of a weight one DRAM interface streams per load request


def credit_tag(buffer: int, tile: int, reader: int) -> int:
    """The ACK tag of reader ``reader``'s credit for ``tile`` of ``buffer`` (unique per writer CU)."""
    return CREDIT | (buffer << 40) | (tile << 12) | reader


@dataclass(frozen=True)
class StripeSpec:
    mu: int  # MU unit id
    room: int  # bytes reserved
    tile_bytes: int  # bytes of every tile it holds (tile buffers), or the weight bytes it holds
    writer: int  # unit id of the CU writing it (-1: DRAM loads it)


@dataclass(frozen=True)
class BufferSpec:
    name: str
    kind: str  # "weight" or "tiles"
    depth: int
    stripes: tuple[StripeSpec, ...]


@dataclass(frozen=True)
class StripeRead:
    """What a CU reads of one stripe each tile."""

    buffer: int
    stripe: int
    nbytes: int


@dataclass(frozen=True)
class SlotSpec:
    """One CU's part of a kernel: what it reads, computes and writes each tile."""

    kernel: str
    cu: int
    cycles: int  # compute cycles per tile
    reads: tuple[StripeRead, ...]
    writes: tuple[tuple[int, int], ...]  # (buffer, stripe) it writes every tile
    credits_to: tuple[tuple[int, int, int], ...]  # (buffer, writer CU, my index among its readers)
    readers: tuple[tuple[int, int], ...]  # (buffer, readers of my stripes): credits I wait for per tile
    dram_read: int  # bytes per tile from DRAM (spills in, streamed weights, extra traffic)
    dram_write: int  # bytes per tile to DRAM (spills out)
    flops: float  # per tile
    cache_reads: tuple[tuple[int, int], ...] = ()  # (cache, stripe) it reads whole every pass
    cache_appends: tuple[tuple[int, int], ...] = ()  # (cache, stripe) it appends to every pass
    experts: tuple[int, ...] = ()  # experts it computes (a kernel over routed experts)
    route: tuple[int, int, int] | tuple[()] = ()  # (experts, top_k, slots per expert per tile) of that kernel
    rank: tuple[int, int] = (0, 1)  # (its index, CUs) within the kernel: spreads its DRAM traffic
    collectives: tuple[str, ...] = ()  # over its output share with its peers on the TP group's chips
    exchange: "TokenExchange | None" = None  # its all-to-all moves routed tokens (MoE dispatch or combine)


@dataclass(frozen=True)
class TokenExchange:
    """A kernel's all-to-all that moves routed tokens between the chips of its TP group
    (sim/chip/exchange.py): the dispatch of token copies to the chips of their experts, or the
    combine of the experts' results back to the tokens' chips."""

    combine: bool  # results back (the counts reversed)
    route: tuple[int, int, int]  # (experts, top_k, slots per expert per tile) of the experts kernel
    token_bytes: int  # a token's row of the exchanged tensor (its m elements x word)


@dataclass(frozen=True)
class CacheStripe:
    mu: int  # MU unit id
    initial: int  # bytes at the start
    growth: int  # bytes appended every pass
    reader: int  # CU unit id reading it every pass
    appender: int  # CU unit id appending to it (-1: none)


@dataclass(frozen=True)
class CacheSpec:
    """A cache that lives through the run, grows every pass and is read whole every pass."""

    name: str
    stripes: tuple[CacheStripe, ...]


@dataclass(frozen=True)
class PartitionProgram:
    index: int  # the plan's partition index
    tiles: int
    kernels: tuple[str, ...]
    slots: tuple[SlotSpec, ...]
    buffers: tuple[BufferSpec, ...]
    compute_seconds: float  # DFModel's terms for one graph pass
    memory_seconds: float
    network_seconds: float
    analytic_seconds: float
    traffic: float  # placement objective: bytes x hops per tile, and its lower bound
    traffic_bound: float

    @property
    def bound(self) -> str:
        """Which of DFModel's three terms is largest."""
        terms = {"compute": self.compute_seconds, "memory": self.memory_seconds, "network": self.network_seconds}
        return max(terms, key=lambda k: terms[k])


def reads_whole(kernel) -> bool:
    """Does every CU of ``kernel`` need all of each input tile? GEMMs do (each CU computes some
    output rows from every input column), unless their outer dimension is routed experts
    (a CU needs its experts' tokens only)."""
    return kernel.kind in GEMM_KINDS and not kernel.role.startswith("experts")


def _dram_parts(nbytes: int, first: int, units: int) -> list[tuple[int, int]]:
    """(interface index, bytes) of a transfer interleaved over DRAM interfaces from ``first``."""
    if nbytes <= 0:
        return []
    n = max(1, min(units, -(-nbytes // DRAM_INTERLEAVE)))
    return [((first + i) % units, b - a) for i in range(n) for a, b in [share(nbytes, n, i)] if b > a]


def kernel_collectives(kernel) -> tuple[str, ...]:
    """The collectives a kernel runs over the TP group, in order (ValueError for one the grid
    chips do not simulate)."""
    kinds = tuple(c for c in kernel.collectives.split(",") if c)
    other = [c for c in kinds if c not in SIMULATED]
    if other:
        raise ValueError(f"kernel {kernel.name!r} issues {', '.join(other)}: grid-fidelity chips simulate "
                         f"{', '.join(SIMULATED)} over the TP group; use fidelity = \"box\"")
    return kinds


def expert_route(kernel) -> tuple[int, int, int] | tuple[()]:
    """(experts, top_k, slots per expert per tile) of a kernel over routed experts, else ()."""
    if not kernel.role.startswith("experts:"):
        return ()
    return (kernel.outer, int(kernel.role.split(":")[1]), max(1, kernel.n))


def token_exchanges(plan: MappingPlan) -> dict[str, TokenExchange]:
    """The all-to-all kernels of a plan over a TP group that move routed tokens: one feeding a
    kernel over routed experts dispatches, one fed by such a kernel combines. A token is a row
    of the exchanged tensor: the graph kernel's m elements (the model width)."""
    if plan.tp < 2 or not plan.graph:
        return {}
    kplan = {k.name: k for k in plan.kernels}
    width = {k["name"]: int(k["m"]) for k in plan.graph["kernels"]}
    out = {}
    for k in plan.kernels:
        if "all_to_all" not in k.collectives.split(","):
            continue
        after = [expert_route(kplan[t.consumer]) for t in plan.tensors if t.producer == k.name]
        before = [expert_route(kplan[t.producer]) for t in plan.tensors if t.consumer == k.name]
        for combine, routes in ((False, after), (True, before)):
            route = next((r for r in routes if r), ())
            if route and k.name not in out:
                out[k.name] = TokenExchange(combine, route, width[k.name] * plan.word)
    return out


def check_expert_parallel(plan: MappingPlan) -> None:
    """A plan whose experts are spread over a TP group of chips must spread them evenly."""
    if plan.tp < 2:
        return
    for k in plan.kernels:
        route = expert_route(k)
        if route and route[0] % plan.tp:
            raise ValueError(f"kernel {k.name!r}: {route[0]} experts do not spread evenly over the TP group's "
                             f"{plan.tp} chips (give a multiple of {plan.tp} experts)")


def build_partitions(plan: MappingPlan, placement: GridPlacement, spec: ChipSpec) -> tuple[PartitionProgram, ...]:
    """What every CU does in each partition, from a single-chip plan and its grid placement.
    Over a TP group of chips a kernel over routed experts holds ``experts / tp`` of them on each
    chip (its CUs' ``experts`` count from 0 on every chip; sim/chip/exchange.py moves the tokens)."""
    kplan = {k.name: k for k in plan.kernels}
    exchanges = token_exchanges(plan)
    pplan = {p.index: p for p in plan.partitions}
    tiles = max(1, plan.num_tiles)
    flops_per_cycle = spec.cu_flops_per_cycle
    out = []
    for part in placement.partitions:
        kernels = {k.name: k for k in part.kernels}
        buffers: list[BufferSpec] = []
        readers: dict[tuple[int, int], list[int]] = {}  # (buffer, writer CU) -> reader CUs, sorted later
        reads: dict[int, list[StripeRead]] = {}
        writes: dict[int, list[tuple[int, int]]] = {}
        for b, pb in enumerate(part.buffers):
            stripes = []
            for s, st in enumerate(pb.stripes):
                writer = kernels[pb.producer].cus[st.writer] if st.writer >= 0 else -1
                stripes.append(StripeSpec(st.mu, st.bytes, st.hi - st.lo, writer))
                if writer >= 0:
                    writes.setdefault(writer, []).append((b, s))
            buffers.append(BufferSpec(pb.name, pb.kind, pb.depth, tuple(stripes)))
            for c in pb.consumers:
                cus = kernels[c].cus
                for j, cu in enumerate(cus):
                    lo, hi = (0, pb.tile_bytes) if reads_whole(kplan[c]) and pb.kind == "tiles" \
                        else share(pb.tile_bytes, len(cus), j)
                    for s, st in enumerate(pb.stripes):
                        nbytes = min(hi, st.hi) - max(lo, st.lo)
                        if nbytes > 0:
                            reads.setdefault(cu, []).append(StripeRead(b, s, nbytes))
                            if stripes[s].writer >= 0:
                                r = readers.setdefault((b, stripes[s].writer), [])
                                if cu not in r:
                                    r.append(cu)
        for r in readers.values():
            r.sort()
        spilled_in = {k: [t for t in plan.tensors if t.consumer == k and not t.on_chip] for k in kernels}
        spilled_out = {k: [t for t in plan.tensors if t.producer == k and not t.on_chip] for k in kernels}
        slots = []
        for name, pk in kernels.items():
            kp = kplan[name]
            n = len(pk.cus)
            on_chip = any(c.reader == name or c.appender == name for c in placement.caches)
            route = expert_route(kp)
            local = route[0] // max(1, plan.tp) if route else 0  # experts living on each chip
            for j, cu in enumerate(pk.cus):
                def mine(total: float, whole: bool = False, n: int = n, j: int = j) -> int:
                    """This CU's share of ``total`` bytes (all of it when ``whole``)."""
                    lo, hi = share(int(round(total)), n, j)
                    return int(round(total)) if whole else hi - lo

                # a spilled input comes from DRAM once: each CU loads its share (handing the rest
                # of the tile round on chip is not modelled)
                dram_in = sum(mine(t.tile_bytes) for t in spilled_in[name])
                # a streamed weight (a weight kernel alone in its partition) comes from DRAM a slice
                # per tile, each byte once per graph pass
                dram_in += mine(kp.weight_bytes / tiles) if kp.streamed else 0
                if not on_chip:  # a cache that stays in DRAM, or other extra traffic
                    dram_in += mine(kp.extra_dram_bytes / tiles)
                dram_out = sum(mine(t.tile_bytes) for t in spilled_out[name])
                cache_reads = tuple((c, s) for c, pc in enumerate(placement.caches) for s, st in enumerate(pc.stripes)
                                    if pc.reader == name and st.lo == j)
                cache_appends = tuple((c, s) for c, pc in enumerate(placement.caches)
                                      for s, st in enumerate(pc.stripes) if pc.appender == name and st.writer == j)
                experts: tuple[int, ...] = ()
                if route:  # expert parallel: CU j takes experts j, j + n, ... (or a share of one)
                    experts = tuple(range(j, local, n)) if n <= local else (j % local,)
                credits_to = tuple(sorted({(b, w, rs.index(cu)) for (b, w), rs in readers.items() if cu in rs}))
                mine_readers = tuple(sorted((b, len(rs)) for (b, w), rs in readers.items() if w == cu))
                flops = kp.flop / tiles / n
                slots.append(SlotSpec(name, cu, -(-int(round(flops)) // flops_per_cycle), tuple(reads.get(cu, ())),
                                      tuple(writes.get(cu, ())), credits_to, mine_readers, dram_in, dram_out, flops,
                                      cache_reads, cache_appends, experts, route, (j, n),
                                      kernel_collectives(kp) if plan.tp > 1 else (), exchanges.get(name)))
        pp = pplan[part.index]
        out.append(PartitionProgram(part.index, tiles, tuple(kernels), tuple(slots), tuple(buffers),
                                    pp.compute_seconds, pp.memory_seconds, pp.network_seconds, pp.seconds,
                                    part.traffic, part.traffic_bound))
    return tuple(out)


def build_caches(placement: GridPlacement) -> tuple[CacheSpec, ...]:
    """The run's caches, stripe by stripe, with the CUs reading and appending to them."""
    where = {k.name: k.cus for part in placement.partitions for k in part.kernels}
    return tuple(CacheSpec(c.name, tuple(CacheStripe(s.mu, s.bytes, c.growth, where[c.reader][s.lo],
                                                     where[c.appender][s.writer] if c.appender else -1)
                                         for s in c.stripes))
                 for c in placement.caches)


def plan_addresses(placement: GridPlacement, capacity: int, method: str = "exact", budget: float = 5.0,
                   alignment: int = 64) -> GridPlacement:
    """(Each stripe takes the room its MU's policy gives it: ``placement.room.reserve``.)"""
    """Every stripe's offset in its MU from allocators' static planner: a stripe lives while its
    partition runs (lifetime [p, p + 1) for the p-th partition), so partitions share the room.
    A stripe that does not fit raises PlacementError naming the MU, the buffer and the shortfall."""
    from dataclasses import replace

    from allocators.errors import AllocatorError
    from allocators.lifetimes import Buffer, Problem
    from allocators.planner import plan as plan_buffers

    per_mu: dict[int, list[tuple[str, int, int, int]]] = {}  # mu -> (id, first, last + 1 partition, bytes)
    for p, part in enumerate(placement.partitions):
        for b, buf in enumerate(part.buffers):
            for s, st in enumerate(buf.stripes):
                per_mu.setdefault(st.mu, []).append((f"{p}/{b}/{s}", p, p + 1, placement.room.reserve(st.bytes)))
    end = len(placement.partitions)
    for c, cache in enumerate(placement.caches):  # caches live through the run (at their first size)
        for s, st in enumerate(cache.stripes):
            per_mu.setdefault(st.mu, []).append((f"cache/{c}/{s}", 0, end, placement.room.reserve(st.bytes)))
    offsets: dict[str, int] = {}
    for mu, items in sorted(per_mu.items()):
        problem = Problem(tuple(Buffer(i, a, b, n, alignment) for i, a, b, n in items))
        try:
            result = plan_buffers(problem, method, capacity=capacity, budget=budget)
        except AllocatorError as exc:
            raise PlacementError(f"MU at tile {mu}: {exc}") from None
        if result.peak > capacity:
            worst = max(items, key=lambda x: x[3])
            where = worst[0].split("/")  # the stripe's id: partition/buffer/stripe or cache/cache/stripe
            name = (placement.caches[int(where[1])].name if where[0] == "cache"
                    else placement.partitions[int(where[0])].buffers[int(where[1])].name)
            raise PlacementError(f"MU at tile {mu} needs {result.peak:,} B for its stripes (largest: {name}, "
                                 f"{worst[3]:,} B) but holds {capacity:,} B: {result.peak - capacity:,} B short")
        offsets.update(result.offsets)
    parts = []
    for p, part in enumerate(placement.partitions):
        bufs = tuple(replace(buf, stripes=tuple(replace(st, address=offsets[f"{p}/{b}/{s}"])
                                                for s, st in enumerate(buf.stripes)))
                     for b, buf in enumerate(part.buffers))
        parts.append(replace(part, buffers=bufs))
    caches = tuple(replace(c, stripes=tuple(replace(st, address=offsets[f"cache/{ci}/{s}"])
                                            for s, st in enumerate(c.stripes)))
                   for ci, c in enumerate(placement.caches))
    return replace(placement, partitions=tuple(parts), caches=caches)


@WORKLOADS.register("dataflow")
@dataclass(frozen=True)
class DataflowParams(Workload):
    kind: str = "dataflow"
    partitions: tuple[PartitionProgram, ...] = ()
    passes: int = 1  # graph passes the run makes
    controller: int = 0  # unit id of the controlling CU
    plan_name: str = ""
    seconds_per_batch: float = 0.0  # DFModel's figure
    pass_seconds: float = 0.0  # DFModel's time of one graph pass (sum of partition times)
    caches: tuple[CacheSpec, ...] = ()  # kept in MUs through the run (a decode step's KV cache)
    skew: float = 0.0  # Zipf exponent of expert popularity for kernels over routed experts
    word: int = 2  # bytes per element (the reduction of a collective adds elements)
    tp: int = 1  # chips of a TP group (grid-fidelity systems)

    SECTION: ClassVar[str] = "dataflow"
    SYSTEM: ClassVar[bool] = False
    MAPS_GRAPH: ClassVar[bool] = True  # else a plan file
    KEYS: ClassVar[Table] = Table({
        "plan": Field("str", "", "plan.json written by `rdasim map --out DIR` (else the graph keys are mapped here)"),
        "passes": Field("int", 1, "graph passes to simulate", min=1),
        "placement_seed": Field("int", 0, "seed of the placement's local search restarts", min=0),
        "address_method": Field("choice", "exact", "static planner giving buffers their MU addresses",
                                choices=("exact", "layergroup", "greedy")),
        "address_budget": Field("time", 5.0, "seconds the exact address planner may take per MU", min=0.01),
        "skew": Field("float", 0.0, "Zipf exponent of expert popularity when tokens are routed to experts "
                      "(0: uniform); each tile's routes are drawn from the run's seed", min=0.0),
    }, doc="a DFModel plan run on the grid")

    @classmethod
    def config_issues(cls, run: dict) -> list[Issue]:
        if run["noc"]["jitter"]:
            return [Issue("noc.jitter", "must be 0 for a dataflow run: its tile writes from one CU to one MU "
                          "are assumed to arrive in order")]
        return []

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "DataflowParams":
        spec = chip.spec
        assert spec is not None, "dataflow runs on one chip: only system workloads are built without a chip spec"
        try:
            plan, placement = resolve_plan(d, spec, chip.room, chip.system)
            check_expert_parallel(plan)
            placement = plan_addresses(placement, spec.mu_bytes, d["address_method"], d["address_budget"])
        except (PlacementError, ValueError, KeyError, OSError) as exc:
            issues.append(Issue("workload.dataflow", str(exc)))
            return cls()
        return cls.from_plan(plan, placement, spec, d["passes"], d["skew"])

    @classmethod
    def from_plan(cls, plan: MappingPlan, placement: GridPlacement, spec: ChipSpec,
                  passes: int = 1, skew: float = 0.0) -> "DataflowParams":
        parts = build_partitions(plan, placement, spec)
        return cls("dataflow", parts, passes, int(spec.cu_tiles()[0]), plan.workload, plan.seconds_per_batch,
                   sum(p.analytic_seconds for p in parts), build_caches(placement), skew, plan.word, max(1, plan.tp))

    @property
    def work_items(self) -> int:
        return self.passes

    def program(self, cfg) -> "Dataflow":
        return Dataflow(self, cfg)

    def figures(self, logged: list, clock_hz: float) -> tuple[dict, dict]:
        """Per-partition simulated and analytic seconds, per-kernel activity: summary and tables."""
        parts = sorted((r for r in logged if isinstance(r, PartitionRecord)), key=lambda r: r.partition)
        kernels = sorted((r for r in logged if isinstance(r, KernelRecord)), key=KernelRecord.row)
        n = len(self.partitions)
        rows: list[dict[str, Any]] = []
        for r in parts:
            prog = self.partitions[r.partition % n]
            sim = (r.end - r.start) / clock_hz
            rows.append({"partition": r.partition, "index": r.index, "kernels": len(prog.kernels),
                         "tiles": prog.tiles, "simulated_seconds": sim,
                         "setup_seconds": (r.started - r.start) / clock_hz,
                         "analytic_seconds": prog.analytic_seconds,
                         "ratio": sim / prog.analytic_seconds if prog.analytic_seconds > 0 else float("nan"),
                         "bound": prog.bound, "compute_seconds": prog.compute_seconds,
                         "memory_seconds": prog.memory_seconds, "network_seconds": prog.network_seconds,
                         "traffic_byte_hops": prog.traffic, "traffic_bound": prog.traffic_bound, "status": r.status})
        by: dict[tuple[int, str], dict[str, Any]] = {}
        for k in kernels:
            key = (k.partition, k.kernel)
            a = by.setdefault(key, {"partition": k.partition, "kernel": k.kernel, "cus": 0, "compute_cycles": 0,
                                    "bytes_in": 0, "bytes_out": 0, "start": k.start, "end": k.end})
            a["cus"] += 1
            a["compute_cycles"] += k.compute_cycles
            a["bytes_in"] += k.bytes_in
            a["bytes_out"] += k.bytes_out
            a["start"], a["end"] = min(a["start"], k.start), max(a["end"], k.end)
        span = {r.partition: max(1, r.end - r.started) for r in parts}
        krows = [{**a, "busy": a["compute_cycles"] / (a["cus"] * span.get(a["partition"], 1))}
                 for _, a in sorted(by.items())]
        simulated = sum(r["simulated_seconds"] for r in rows) / max(1, self.passes)
        scale = self.seconds_per_batch / self.pass_seconds if self.pass_seconds > 0 else 1.0
        summary = {
            "seconds_per_pass_simulated": simulated, "seconds_per_pass_analytic": self.pass_seconds,
            "seconds_per_batch_simulated": simulated * scale, "seconds_per_batch_analytic": self.seconds_per_batch,
            "partitions": [{"index": r["index"], "kernels": list(self.partitions[r["partition"] % n].kernels),
                            "simulated_seconds": r["simulated_seconds"], "analytic_seconds": r["analytic_seconds"],
                            "bound": r["bound"]} for r in rows],
        }
        cols = lambda rs, keys: {k: [r[k] for r in rs] for k in keys}  # noqa: E731
        tables = {"partitions": cols(rows, PARTITION_COLUMNS), "kernels": cols(krows, KERNEL_COLUMNS)}
        return summary, tables


PARTITION_COLUMNS = ("partition", "index", "kernels", "tiles", "simulated_seconds", "setup_seconds", "analytic_seconds",
                     "ratio", "bound", "compute_seconds", "memory_seconds", "network_seconds", "traffic_byte_hops",
                     "traffic_bound", "status")
KERNEL_COLUMNS = ("partition", "kernel", "cus", "compute_cycles", "busy", "bytes_in", "bytes_out", "start", "end")


def resolve_plan(d: dict, spec: ChipSpec, room: MuRoom | None = None,
                 system: System | None = None) -> tuple[MappingPlan, GridPlacement]:
    """The plan and its placement: from a plan file, or mapped here from the graph keys (over
    ``system`` when the chips are grid chips of a system, else onto the one chip)."""
    from mapping.specs import map_graph_keys, read_plan_file

    if d.get("plan"):
        plan, data = read_plan_file(d["plan"])
        if plan.chip != spec.name:
            raise ValueError(f"the plan maps onto {plan.chip!r}; this run's chip is {spec.name!r}")
        _check_chips(plan, system)
        stored = data.get("placement")
        room = room or MuRoom(spec.mu_bytes)
        if stored and MuRoom(**stored["room"]) == room and stored.get("seed") == d.get("placement_seed", 0):
            return plan, GridPlacement.from_dict(stored)
        return plan, place_on_grid(plan, spec, d.get("placement_seed", 0), room)  # for this run's memory policy
    from mapping.systems import LinkKind, NetworkDim, Parallelism

    if system is None:
        system = System(1, spec.dfmodel(), (NetworkDim(LinkKind.RING, 1, 1.0, Parallelism.TP),))
    plan = map_graph_keys("dataflow", d.get("graph") or {}, d.get("mapping") or {}, system)
    _check_chips(plan, system)
    return plan, place_on_grid(plan, spec, d.get("placement_seed", 0), room)


def _check_chips(plan: MappingPlan, system: System | None) -> None:
    """A plan fits the run's chips: one chip, or a system of grid chips it runs on whole."""
    if not plan.feasible:
        raise ValueError(f"the plan is {plan.status}: {plan.reason}")
    chips = system.chips if system is not None else 1
    if plan.chips != chips:
        raise ValueError(f"the plan is for {plan.chips} chips; this run has {chips}")
    if plan.pp > 1:
        raise ValueError(f"the plan has {plan.pp} pipeline stages; grid-fidelity chips run TP and DP plans "
                         "(simulate pipelines with the pipeline workload on box chips)")


class Dataflow:
    """The program every CU runs: the controller's partition loop, and kernel slices."""

    def __init__(self, p: DataflowParams, cfg):
        self.p = p
        self.cfg = cfg
        self._routes: dict[tuple, np.ndarray] = {}
        self.dram = list(range(cfg.spec.tiles, cfg.spec.tiles + cfg.spec.dram_units))
        self.slot_of = [{s.cu: i for i, s in enumerate(part.slots)} for part in p.partitions]
        # what each CU of each partition needs before it starts: the stripes it touches
        self.needs = []
        for part, slots in zip(p.partitions, self.slot_of):
            need = {}
            for cu, i in slots.items():
                s = part.slots[i]
                need[cu] = {(r.buffer, r.stripe) for r in s.reads} | set(s.writes)
            self.needs.append(need)

    def start(self, cu):
        return self._control(cu) if cu.uid == self.p.controller else None

    def on_message(self, cu, msg):
        st = cu.state
        if is_landing(msg):  # a peer chip's landing buffer for this CU's tokens
            take_landing_reference(cu, msg)
            return None
        if msg.kind == m.REFERENCE and msg.tag & CACHE:
            st.setdefault("cache", {})[divmod(msg.tag & (CACHE - 1), 1 << 20)] = received(cu, msg)
        elif msg.kind == m.REFERENCE:
            st.setdefault("refs", {})[divmod(msg.tag, 1 << 20)] = received(cu, msg)
        elif msg.kind == m.CONTROL and msg.arg == m.CTRL_PARTITION:
            st["start"] = msg
        else:
            raise RuntimeError(f"dataflow CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")
        start = st.get("start")
        if start is None:
            return None
        p = start.buf % len(self.p.partitions)
        refs = st.get("refs", {})
        if not self.needs[p][cu.uid] <= set(refs):
            return None
        slot = self.p.partitions[p].slots[start.nbytes]
        if not {*slot.cache_reads, *slot.cache_appends} <= set(st.get("cache", {})):
            return None
        st.pop("start")
        st["refs"] = {}
        return self._kernel(cu, start, p, refs, st.get("cache", {}))

    # ------------------------------------------------------------------ controller
    def _control(self, cu: ComputeUnit) -> Task:
        shard, reclaim = cu.shard, self.cfg.reclaim
        nparts = len(self.p.partitions)
        if self.p.caches:
            yield from self._caches(cu)
        for rep in range(self.p.passes):
            t_pass = shard.now
            shard.counts["admitted"] += 1
            ok_pass = True
            for pi, part in enumerate(self.p.partitions):
                t0 = shard.now
                order = [(b, s) for b, buf in enumerate(part.buffers) for s in range(len(buf.stripes))]
                reqs = [(part.buffers[b].stripes[s].mu, part.buffers[b].stripes[s].room,
                         WEIGHT if part.buffers[b].kind == "weight" else TILES) for b, s in order]
                refs = yield from allocate_many(cu, reqs, m.STREAM)
                if any(r is None for r in refs):  # on_oom = fail: the partition cannot run
                    shard.log(PartitionRecord(rep * nparts + pi, part.index, t0, shard.now, shard.now, "failed"))
                    ok_pass = False
                    break
                self._load_weights(cu, part, order, refs)
                users: dict[tuple[int, int], list[int]] = {}
                for slot in part.slots:
                    for key in self.needs[pi][slot.cu]:
                        users.setdefault(key, []).append(slot.cu)
                receivers = [sorted(users.get(key, [])) for key in order]
                tags = [[(b << 20) | s] * len(rc) for (b, s), rc in zip(order, receivers)]
                yield from share_refs(cu, refs, receivers, reclaim, tags)
                for r in refs:
                    drop(cu, r, reclaim)
                started = shard.now
                tags2 = [cu.request(m.CONTROL, slot.cu, arg=m.CTRL_PARTITION, buf=rep * nparts + pi, nbytes=i)
                         for i, slot in enumerate(part.slots)]
                got = yield Replies(tags2, "control")
                ok = all(r.arg == m.FINISHED for r in got.values())
                ok_pass = ok_pass and ok
                shard.trace_span(cu.uid, f"partition {part.index}", t0, shard.now - t0, "partition")
                status = "ok" if ok else "failed"
                shard.log(PartitionRecord(rep * nparts + pi, part.index, t0, started, shard.now, status))
            shard.counts["finished"] += 1
            shard.record("request", rep, t_pass, shard.now, 1, "ok" if ok_pass else "failed")
            if not ok_pass:
                break

    def _caches(self, cu):
        """Allocate every cache stripe at its MU, have DRAM stream its first contents in, and
        hand the references to the CUs that read and append to it for the whole run."""
        shard, reclaim = cu.shard, self.cfg.reclaim
        order = [(c, s) for c, cache in enumerate(self.p.caches) for s in range(len(cache.stripes))]
        stripes = [self.p.caches[c].stripes[s] for c, s in order]
        refs = yield from allocate_many(cu, [(st.mu, st.initial, CACHED) for st in stripes])
        if any(r is None for r in refs):
            shard.log(PartitionRecord(-1, -1, 0, shard.now, shard.now, "failed"))
            return
        k = 0
        for st, ref in zip(stripes, refs):
            for lo in range(0, st.initial, LOAD_CHUNK):
                n = min(LOAD_CHUNK, st.initial - lo)
                cu.send(m.CONTROL, self.dram[k % len(self.dram)], arg=m.CTRL_LOAD, nbytes=n, mu=ref.mu, buf=ref.buf,
                        alloc=ref.alloc)
                k += 1
        receivers = [sorted({st.reader} | ({st.appender} if st.appender >= 0 else set())) for st in stripes]
        tags = [[CACHE | (c << 20) | s] * len(rc) for (c, s), rc in zip(order, receivers)]
        yield from share_refs(cu, refs, receivers, reclaim, tags)
        for r in refs:
            drop(cu, r, reclaim)

    def _tile_routes(self, route: tuple[int, int, int], tile: int) -> np.ndarray:
        """[tokens, top_k] experts of the tokens of ``tile`` (drawn as the moe workload draws them,
        from the run's seed and the tile: every chip of a system draws the same)."""
        key = (route, tile)
        if key not in self._routes:
            experts, top_k, slots = route
            tokens = max(1, experts * slots // max(1, top_k))
            self._routes[key] = moe_route(self.cfg.seed, tile, tokens, experts, top_k, self.p.skew)
        return self._routes[key]

    def _expert_tiles(self, route: tuple[int, int, int], tile: int) -> list[int]:
        """Token copies each expert gets in ``tile``."""
        return np.bincount(self._tile_routes(route, tile).ravel(), minlength=route[0]).tolist()

    def _tp_index(self) -> int:
        """This chip's place in its TP group (0 on a chip of its own)."""
        place = self.cfg.system
        return place.group("TP").index(place.chip) if place is not None else 0

    def _cycles(self, slot: SlotSpec, tile: int) -> int:
        """Compute cycles of a tile: for a kernel over routed experts, the share of its padded
        work its experts really got (copies beyond an expert's slots are dropped, as a
        capacity factor does). Over a TP group, this chip's experts are the group index's block."""
        if not slot.route:
            return slot.cycles
        got = self._expert_tiles(slot.route, tile)
        cap = slot.route[2]
        base = self._tp_index() * (slot.route[0] // self.p.tp)
        used = sum(min(got[base + e], cap) for e in slot.experts)
        return -(-slot.cycles * used // (cap * len(slot.experts)))

    def _exchange(self, cu, part: PartitionProgram, slot: SlotSpec, run: int, group: tuple[int, ...], i: int):
        """Tile ``i``'s routed tokens to and from the peers on the group's chips (sim/chip/exchange.py):
        this CU's share of every count (the kernel's CUs split a tile's tokens)."""
        x = slot.exchange
        assert x is not None
        p = len(group)
        rep = run // len(self.p.partitions)
        routes = self._tile_routes(x.route, rep * part.tiles + i)
        counts = exchange_counts(routes, p, x.route[0])
        me = group.index(self.cfg.system.chip)
        to, frm = (counts[:, me], counts[me, :]) if x.combine else (counts[me, :], counts[:, me])
        j, n = slot.rank
        mine = lambda c: int(c) * (j + 1) // n - int(c) * j // n  # noqa: E731 - this CU's share of a count
        # the most a peer can send: its tokens (dispatch) or this chip's (combine) to every expert here
        owned = np.bincount(token_owners(len(routes), p), minlength=p)
        most = min(x.route[1], x.route[0] // p)
        bound = [mine(int(owned[me if x.combine else h]) * most) for h in range(p)]
        b, s = slot.writes[0] if slot.writes else (slot.reads[0].buffer, slot.reads[0].stripe)
        ok = yield from exchange(cu, group, self.cfg.system.chip, [mine(c) for c in to], [mine(c) for c in frm],
                                 bound, x.token_bytes, part.buffers[b].stripes[s].mu, fixed_slots(self.cfg), run, i,
                                 self.cfg.reclaim, self.cfg.sizing.max_packet_bytes)
        if not ok:
            cu.state["exchange_failed"] = True

    def _load_weights(self, cu, part: PartitionProgram, order, refs) -> None:
        """Ask the DRAM interfaces to stream every weight stripe in, in chunks spread over them."""
        k = 0
        for (b, s), ref in zip(order, refs):
            if part.buffers[b].kind != "weight":
                continue
            room = part.buffers[b].stripes[s].room
            for lo in range(0, room, LOAD_CHUNK):
                n = min(LOAD_CHUNK, room - lo)
                cu.send(m.CONTROL, self.dram[k % len(self.dram)], arg=m.CTRL_LOAD, nbytes=n, mu=ref.mu, buf=ref.buf,
                        alloc=ref.alloc, flags=m.STREAM)
                k += 1

    # ------------------------------------------------------------------ a kernel's slice on one CU
    def _tp_group(self, slot: SlotSpec) -> tuple[int, ...]:
        """The chips this CU's collectives run over (empty: none, or a chip on its own)."""
        place = self.cfg.system
        if not slot.collectives or place is None:
            return ()
        group = place.group("TP")
        return group if len(group) > 1 else ()

    def _write_tile(self, cu, part: PartitionProgram, slot: SlotSpec, refs: dict, i: int, first: int):
        """Write this CU's share of output tile ``i`` once its readers have freed the slot."""
        waits = [credit_tag(b, i - part.buffers[b].depth, k) for b, n in slot.readers
                 if i >= part.buffers[b].depth for k in range(n)]
        if waits:
            yield Replies(waits, "flow")
        for b, s in slot.writes:
            ref = refs[b, s]
            st = part.buffers[b].stripes[s]
            cu.send(m.WRITE, ref.mu, nbytes=st.tile_bytes, arg=(i % part.buffers[b].depth) * st.tile_bytes,
                    mu=ref.mu, buf=ref.buf, alloc=ref.alloc, flags=m.STREAM)
        for u, n in _dram_parts(slot.dram_write, first + i, len(self.dram)):
            cu.send(m.WRITE, self.dram[u], nbytes=n, buf=-1)

    def _reduce_and_write(self, cu, part: PartitionProgram, slot: SlotSpec, refs: dict, run: int,
                          group: tuple[int, ...], first: int, i: int):
        """Tile ``i``, just computed: the kernel's collectives over this CU's share with its peers
        on the group's chips, then its write, after the previous tile's (up to PARTIALS tiles'
        collectives are in flight at once, as a DMA engine keeps several transfers going)."""
        share_bytes = sum(part.buffers[b].stripes[s].tile_bytes for b, s in slot.writes) + slot.dram_write
        add = 2.0 / (self.p.word * self.cfg.spec.cu_flops_per_cycle)  # cycles per byte of an add (an FMA = 2 flops)
        chip = self.cfg.system.chip
        for k, kind in enumerate(slot.collectives):
            if kind == "all_to_all" and slot.exchange is not None:
                yield from self._exchange(cu, part, slot, run, group, i)
            else:
                yield from collective(cu, kind, group, chip, share_bytes, run, i * 4 + k, add)
        if i > 0:
            yield Replies([signal_tag(run, i - 1, WRITTEN)], "flow")
        yield from self._write_tile(cu, part, slot, refs, i, first)
        cu.signal(signal_tag(run, i, WRITTEN))
        cu.signal(signal_tag(run, i, FREED))

    def _kernel(self, cu, start, pi: int, refs: dict, cache: dict):
        shard, reclaim = cu.shard, self.cfg.reclaim
        part = self.p.partitions[pi]
        slot = part.slots[start.nbytes]
        rep = start.buf // len(self.p.partitions)  # the graph pass
        t0 = shard.now
        compute = 0
        failed = False
        units = len(self.dram)
        first = slot.rank[0] * units // slot.rank[1]  # the kernel's CUs start on interfaces spread evenly

        def issue(i: int) -> list[int]:
            tags = []
            for r in slot.reads:
                ref = refs[r.buffer, r.stripe]
                st = part.buffers[r.buffer].stripes[r.stripe]
                pos = st.tile_bytes * (i + 1) if part.buffers[r.buffer].kind == "tiles" else st.tile_bytes
                tags.append(cu.request(m.READ_REQ, ref.mu, nbytes=r.nbytes, arg=pos, mu=ref.mu, buf=ref.buf,
                                       alloc=ref.alloc, flags=m.STREAM))
            for u, n in _dram_parts(slot.dram_read, first + i, units):
                tags.append(cu.request(m.READ_REQ, self.dram[u], nbytes=n, arg=cu.uid, buf=-1))
            for c, s in slot.cache_reads:  # a tile's part of the cache as it stood at this pass
                st = self.p.caches[c].stripes[s]
                size = st.initial + rep * st.growth
                lo, hi = share(size, part.tiles, i)
                ref = cache[c, s]
                if hi > lo:
                    tags.append(cu.request(m.READ_REQ, ref.mu, nbytes=hi - lo, arg=size, mu=ref.mu, buf=ref.buf,
                                           alloc=ref.alloc))
            return tags

        group = self._tp_group(slot)
        ahead = deque(issue(j) for j in range(min(PREFETCH, part.tiles)))
        for i in range(part.tiles):
            pending = ahead.popleft()
            if pending:
                got = yield Replies(pending, "memory")
                failed = failed or any(r.status != m.STATUS_OK for r in got.values())
            for b, writer, k in slot.credits_to:
                cu.send(m.ACK, writer, tag=credit_tag(b, i, k))
            if i + PREFETCH < part.tiles:
                ahead.append(issue(i + PREFETCH))
            if group and i >= PARTIALS:  # room for its partial sums: the tile PARTIALS back is written
                yield Replies([signal_tag(start.buf, i - PARTIALS, FREED)], "network")
            cycles = self._cycles(slot, rep * part.tiles + i)
            if cycles:
                yield Compute(cycles)
                compute += cycles
            if group:  # another task reduces the tile with the peers and writes it
                cu.spawn(self._reduce_and_write(cu, part, slot, refs, start.buf, group, first, i))
            else:
                yield from self._write_tile(cu, part, slot, refs, i, first)
        if group:
            yield Replies([signal_tag(start.buf, i, FREED) for i in range(max(0, part.tiles - PARTIALS), part.tiles)],
                          "network")
        drain = [credit_tag(b, i, k) for b, n in slot.readers
                 for i in range(max(0, part.tiles - part.buffers[b].depth), part.tiles) for k in range(n)]
        if drain:
            yield Replies(drain, "flow")
        for c, s in slot.cache_appends:  # this pass's new entries
            ref = cache[c, s]
            cu.send(m.APPEND, ref.mu, nbytes=self.p.caches[c].stripes[s].growth, mu=ref.mu, buf=ref.buf,
                    alloc=ref.alloc)
        for ref in refs.values():
            drop(cu, ref, reclaim)
        if rep == self.p.passes - 1:  # its last pass: done with the caches too
            for key in [*slot.cache_reads, *slot.cache_appends]:
                if key in cache:
                    drop(cu, cache.pop(key), reclaim)
        shard.trace_span(cu.uid, slot.kernel, t0, shard.now - t0, "kernel")
        shard.log(KernelRecord(start.buf, slot.kernel, cu.uid, t0, shard.now, compute, _bytes_in(part, slot),
                               _bytes_out(part, slot)))
        failed = failed or bool(cu.state.pop("exchange_failed", False))  # a landing buffer it could not have
        cu.send(m.ACK, start.src, tag=start.tag, arg=m.FAILED if failed else m.FINISHED)


def signal_tag(run: int, tile: int, what: int) -> int:
    """Tag of a CU's two kernel tasks telling each other a tile is computed / reduced and written."""
    return SIGNAL | (run << 28) | (tile << 8) | what


def _bytes_in(part: PartitionProgram, slot: SlotSpec) -> int:
    return part.tiles * (sum(r.nbytes for r in slot.reads) + slot.dram_read)


def _bytes_out(part: PartitionProgram, slot: SlotSpec) -> int:
    per = sum(part.buffers[b].stripes[s].tile_bytes for b, s in slot.writes)
    return part.tiles * (per + slot.dram_write)

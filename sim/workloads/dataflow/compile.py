"""Compile a placed DFModel plan into what every CU does: per partition, the buffers and
their stripes in the MUs, and each CU's slot of its kernel (what it reads, computes and
writes each tile, whom it owes flow-control credits, its DRAM traffic, its collectives).

Pure functions of the plan, its grid placement (mapping/placement.py) and the chip; the
records here are what the CU runtime (program.py) executes; ``CompiledRun`` is what it and the
figures (figures.py) read of a run's parameters, so neither imports the workload class (params.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mapping.chips import ChipSpec
from mapping.placement import GEMM_KINDS, GridPlacement, share
from mapping.plan import MappingPlan
from sim.chip.collectives import SIMULATED


@dataclass(frozen=True)
class Homes:
    """Where a plan's weights and KV caches live, as the workload states it.

    ``weights``: "mu" (the plan's choice: resident in MUs, loaded every partition, or streamed
    from DRAM when alone in their partition) or a memory tier: every weight homed there and
    streamed a slice per tile, each byte once per pass, from the chip's first tier (``source``;
    homed in a later tier, they are first copied into it: the model switch). ``kv``: "mu" (the
    caches in MUs when they fit, else read from DRAM) or a tier: the caches homed there, read
    from it every pass and their new entries written to it."""

    weights: str = "mu"
    kv: str = "mu"
    source: str = ""  # the tier weights stream from (the chip's first)

    @property
    def tiered(self) -> bool:
        return self.weights != "mu" or self.kv != "mu"


IN_MUS = Homes()  # weights and caches where the plan puts them (on chip), as before memory tiers


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
    lag: int = 0  # loop-carried (mapping/looping.py): its readers read tile i - lag at their tile i


@dataclass(frozen=True)
class StripeRead:
    """What a CU reads of one stripe each tile: from the MU itself, or (a multicast read,
    ``multicast_trees``) relayed to it by ``parent``; it relays what it gets on to ``children``."""

    buffer: int
    stripe: int
    nbytes: int
    parent: int = -1  # the CU relaying it (-1: read from the MU)
    children: tuple[int, ...] = ()  # the CUs it relays it to


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
    tier_reads: tuple[tuple[str, int], ...] = ()  # (memory tier, bytes per tile): streamed weights, a homed cache
    tier_writes: tuple[tuple[str, int], ...] = ()  # (memory tier, bytes per tile): a homed cache's new entries


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

    @property
    def holders(self) -> tuple[int, ...]:
        """The CUs its reference is copied to for the run: its reader and its appender."""
        return tuple(sorted({self.reader} | ({self.appender} if self.appender >= 0 else set())))


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


class CompiledRun(Protocol):
    """What the CU runtime and the figures read of a compiled dataflow run (the registered
    workload, params.py, is one): its partitions and caches, their homes and the run's shape."""

    @property
    def partitions(self) -> tuple[PartitionProgram, ...]: ...
    @property
    def caches(self) -> tuple[CacheSpec, ...]: ...
    @property
    def homes(self) -> Homes: ...
    @property
    def passes(self) -> int: ...
    @property
    def controller(self) -> int: ...
    @property
    def seconds_per_batch(self) -> float: ...
    @property
    def pass_seconds(self) -> float: ...
    @property
    def skew(self) -> float: ...
    @property
    def word(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def tokens_per_pass(self) -> int: ...
    @property
    def weight_bytes(self) -> int: ...
    @property
    def kv_bytes(self) -> int: ...
    @property
    def kv_growth(self) -> int: ...


def stripe_needs(slot: SlotSpec) -> frozenset[tuple[int, int]]:
    """The (buffer, stripe)s a CU's slot reads or writes: it needs their references to start."""
    return frozenset({(r.buffer, r.stripe) for r in slot.reads} | set(slot.writes))


def stripe_holders(part: PartitionProgram) -> dict[tuple[int, int], list[int]]:
    """Every (buffer, stripe) of a partition, in order, and the CUs its reference is copied to
    (sorted): the controller allocates each stripe, shares it with these and drops its own."""
    users: dict[tuple[int, int], list[int]] = {(b, s): [] for b, buf in enumerate(part.buffers)
                                                for s in range(len(buf.stripes))}
    for slot in part.slots:
        for key in stripe_needs(slot):
            users[key].append(slot.cu)
    return {key: sorted(cus) for key, cus in users.items()}


def multicast_trees(cus: tuple[int, ...], stripes: int, cols: int) -> list[dict[int, tuple[int, tuple[int, ...]]]]:
    """For each stripe of a tile every one of ``cus`` reads whole, each CU's (parent, children)
    in the tree that multicasts it: the root reads it from its MU (parent -1) and every CU
    relays what it receives to its children, so the MU sends the stripe once and each CU
    receives it once ("one injection, replicated along a tree": Enright Jerger, Peh and
    Lipasti, "Virtual Circuit Tree Multicasting", ISCA 2008, against a unicast per
    destination; here the copies are made at the destinations' routers, as path-based
    multicast absorbs and forwards at each destination: Lin, McKinley and Ni, IEEE TPDS 5(8),
    1994). The tree halves recursively over the CUs in snake order of their tiles (a
    binomial-like tree: depth log2 n, two children a CU at most, neighbours near the leaves);
    stripe s starts the order s n / stripes further on, so every CU is an inner node of some
    stripes' trees and none relays them all."""
    order = sorted(cus, key=lambda t: (t // cols, t % cols if (t // cols) % 2 == 0 else -(t % cols)))
    n = len(order)
    out = []
    for s in range(stripes):
        k = s * n // max(1, stripes)
        ring = order[k:] + order[:k]
        tree: dict[int, tuple[int, tuple[int, ...]]] = {}
        stack = [(0, n, -1)]
        while stack:
            lo, hi, parent = stack.pop()
            mid = lo + 1 + (hi - lo) // 2  # the rest [lo + 1, hi) in two halves
            kids = [(a, b) for a, b in ((lo + 1, mid), (mid, hi)) if a < min(b, hi)]
            tree[ring[lo]] = (parent, tuple(ring[a] for a, _ in kids))
            stack += [(a, min(b, hi), ring[lo]) for a, b in kids]
        out.append(tree)
    return out


def reads_whole(kernel, batched_share: bool = False) -> bool:
    """Does every CU of ``kernel`` need all of each input tile? GEMMs do (each CU computes some
    output rows from every input column), unless their outer dimension is routed experts
    (a CU needs its experts' tokens only) or, with ``batched_share``, a batch of independent
    GEMMs of two activations (attention's heads: a CU needs its heads' rows of each input only;
    a weight GEMM batched over heads still reads all of its one input)."""
    if batched_share and kernel.kind == "gemm" and kernel.outer > 1:
        return False
    return kernel.kind in GEMM_KINDS and not kernel.role.startswith("experts")


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


def build_partitions(plan: MappingPlan, placement: GridPlacement, spec: ChipSpec,
                     homes: Homes = IN_MUS, batched_share: bool = False,
                     multicast: bool = False) -> tuple[PartitionProgram, ...]:
    """What every CU does in each partition, from a single-chip plan and its grid placement
    (``homes``: where weights and caches live; ``batched_share``: reads_whole's; ``multicast``:
    a tile every CU of a kernel reads whole reaches them by multicast, ``multicast_trees``).
    Over a TP group of chips a kernel over routed experts holds ``experts / tp`` of them on each
    chip (its CUs' ``experts`` count from 0 on every chip; sim/chip/exchange.py moves the tokens)."""
    kplan = {k.name: k for k in plan.kernels}
    lags = {f"{t.producer}->{t.consumer}": t.lag for t in plan.tensors if t.lag}  # loop-carried tile buffers
    exchanges = token_exchanges(plan)
    pplan = {p.index: p for p in plan.partitions}
    tiles = max(1, plan.num_tiles)
    flops_per_cycle = spec.cu_flops_per_cycle
    out = []
    for part in placement.partitions:
        kernels = {k.name: k for k in part.kernels}
        wired = _wire_buffers(part, kernels, kplan, lags, spec, batched_share, multicast)
        buffers, readers, reads, writes = wired.buffers, wired.readers, wired.reads, wired.writes
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
                dram_in, dram_out, tier_in, tier_out = _cu_bytes(kp, j, n, tiles, spilled_in[name], spilled_out[name],
                                                                 on_chip, homes)
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
                                      kernel_collectives(kp) if plan.tp > 1 else (), exchanges.get(name),
                                      tuple(sorted(tier_in.items())), tuple(sorted(tier_out.items()))))
        pp = pplan[part.index]
        out.append(PartitionProgram(part.index, tiles, tuple(kernels), tuple(slots), tuple(buffers),
                                    pp.compute_seconds, pp.memory_seconds, pp.network_seconds, pp.seconds,
                                    part.traffic, part.traffic_bound))
    return tuple(out)


@dataclass(frozen=True)
class _Wiring:
    """A partition's buffers and who touches them: each CU's stripe reads and (buffer, stripe)
    writes, and the reader CUs of each (buffer, writer CU), sorted."""

    buffers: list[BufferSpec]
    readers: dict[tuple[int, int], list[int]]
    reads: dict[int, list[StripeRead]]
    writes: dict[int, list[tuple[int, int]]]


def _wire_buffers(part, kernels: dict, kplan: dict, lags: dict[str, int], spec: ChipSpec, batched_share: bool,
                  multicast: bool) -> _Wiring:
    """The stripes of each of ``part``'s buffers, who writes them and what each consumer CU
    reads of them (its share of a tile, or all of it when it reads the tile whole)."""
    buffers: list[BufferSpec] = []
    readers: dict[tuple[int, int], list[int]] = {}  # (buffer, writer CU) -> reader CUs, sorted below
    reads: dict[int, list[StripeRead]] = {}
    writes: dict[int, list[tuple[int, int]]] = {}
    for b, pb in enumerate(part.buffers):
        stripes = []
        for s, st in enumerate(pb.stripes):
            writer = kernels[pb.producer].cus[st.writer] if st.writer >= 0 else -1
            stripes.append(StripeSpec(st.mu, st.bytes, st.hi - st.lo, writer))
            if writer >= 0:
                writes.setdefault(writer, []).append((b, s))
        buffers.append(BufferSpec(pb.name, pb.kind, pb.depth, tuple(stripes), lags.get(pb.name, 0)))
        for c in pb.consumers:
            cus = kernels[c].cus
            whole = reads_whole(kplan[c], batched_share) and pb.kind == "tiles"
            trees = multicast_trees(cus, len(pb.stripes), spec.cols) if whole and multicast else None
            for j, cu in enumerate(cus):
                lo, hi = (0, pb.tile_bytes) if whole else share(pb.tile_bytes, len(cus), j)
                for s, st in enumerate(pb.stripes):
                    nbytes = min(hi, st.hi) - max(lo, st.lo)
                    if nbytes > 0:
                        parent, children = trees[s][cu] if trees else (-1, ())
                        reads.setdefault(cu, []).append(StripeRead(b, s, nbytes, parent, children))
                        if stripes[s].writer >= 0:
                            r = readers.setdefault((b, stripes[s].writer), [])
                            if cu not in r:
                                r.append(cu)
    for r in readers.values():
        r.sort()
    return _Wiring(buffers, readers, reads, writes)


def _cu_bytes(kp, j: int, n: int, tiles: int, spilled_in: list, spilled_out: list, on_chip: bool,
              homes: Homes) -> tuple[int, int, dict[str, int], dict[str, int]]:
    """CU ``j`` of ``n`` of kernel ``kp``: its bytes from and to DRAM a tile, and from and to each
    memory tier (by tier name)."""
    def mine(total: float) -> int:
        """This CU's share of ``total`` bytes."""
        lo, hi = share(int(round(total)), n, j)
        return hi - lo

    # a spilled input comes from DRAM once: each CU loads its share (handing the rest
    # of the tile round on chip is not modelled)
    dram_in = sum(mine(t.tile_bytes) for t in spilled_in)
    # a streamed weight (a weight kernel alone in its partition, or homed in a tier)
    # comes a slice per tile, each byte once per graph pass
    weight = mine(kp.weight_bytes / tiles) if kp.streamed else 0
    extra = mine(kp.extra_dram_bytes / tiles) if not on_chip else 0  # a cache not in MUs, ...
    tier_in: dict[str, int] = {}
    tier_out: dict[str, int] = {}
    if homes.weights != "mu" and weight:
        tier_in[homes.source] = weight
    else:
        dram_in += weight
    if homes.kv != "mu" and extra and kp.role.startswith(("read:", "append:")):
        into = tier_in if kp.role.startswith("read:") else tier_out
        into[homes.kv] = into.get(homes.kv, 0) + extra
    else:
        dram_in += extra
    dram_out = sum(mine(t.tile_bytes) for t in spilled_out)
    return dram_in, dram_out, tier_in, tier_out


def build_caches(placement: GridPlacement) -> tuple[CacheSpec, ...]:
    """The run's caches, stripe by stripe, with the CUs reading and appending to them."""
    where = {k.name: k.cus for part in placement.partitions for k in part.kernels}
    return tuple(CacheSpec(c.name, tuple(CacheStripe(s.mu, s.bytes, c.growth, where[c.reader][s.lo],
                                                     where[c.appender][s.writer] if c.appender else -1)
                                         for s in c.stripes))
                 for c in placement.caches)

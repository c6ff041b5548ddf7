"""Placement of a plan's partitions on an RDA's grid: kernels on CUs, tensors in MUs.

For each partition of a single-chip plan, every kernel gets a set of CUs (in proportion to
its FLOPs, at least one: a balanced spatial pipeline, as DFModel's roofline assumes) and
every buffer the partition needs gets MU space:

- a weight (a ``gemm_weight`` kernel whose weight is resident, not streamed) of ``W`` bytes,
  read every tile in slices by the kernel's CUs;
- an on-chip tensor (producer and consumer in the partition): a circular buffer of
  ``depth`` tiles (DFModel's buffer depth) per producer CU, each holding that CU's share of
  a tile; the consumer's CUs read the whole tile (GEMMs: every CU needs every input column)
  or their share (elementwise kernels).

A buffer larger than the room left in an MU is cut into stripes over several MUs (the
seed proposal's multi-MU virtual buffer): weights by byte range, tile buffers by a range
of every tile's bytes, so each stripe has one writer and a fixed share of every tile.
Stripes are packed into MUs in kernel order, and the assignment of CUs and MU contents
to tiles minimises the partition's traffic, bytes per tile x hops, by alternating two
linear assignment problems (scipy's ``linear_sum_assignment``): CUs given the MUs, then
MUs given the CUs, until neither improves. Each step is optimal for its half, so the
objective never rises; restarts from seeded random CU orders keep the best. The bound
reported beside it is Gilmore and Lawler's (1962, 1963) for this bipartite quadratic
assignment: each CU slot's traffic, at its best tile, sent to the nearest MU tiles in
order of bytes (rearrangement), minimised over a CU-to-tile assignment.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from mapping.chips import ChipSpec
from mapping.plan import KernelPlan, MappingPlan

GEMM_KINDS = ("gemm", "gemm_weight")
ROUNDS = 12  # alternations of the local search at most (each never raises the objective)
LARGE = 256  # CUs beyond which the local search is cut short (sn40l-like: 1,040)
MIN_SHARE = 512  # bytes of a tile's output a CU computes at least


class PlacementError(ValueError):
    """A partition that cannot be placed on the grid (names the partition and what is short)."""


@dataclass(frozen=True)
class MuRoom:
    """How an MU gives out room under a memory policy: a buffer of ``n`` bytes reserves
    ``max(minimum, n rounded up to granule)``; none may exceed ``largest``; an MU holds
    ``per_mu`` buffers at most (0: any number)."""

    capacity: int
    granule: int = 64
    minimum: int = 0
    largest: int = 0  # 0: the capacity
    per_mu: int = 0

    def reserve(self, nbytes: int) -> int:
        return max(self.minimum, -(-nbytes // self.granule) * self.granule)

    @property
    def biggest(self) -> int:
        return self.largest or self.capacity


@dataclass(frozen=True)
class Stripe:
    """One MU's part of a buffer: the byte range [lo, hi) of the weight, or of every tile
    (tile buffers), that it holds; ``writer`` is the producer's CU slot (-1: loaded from DRAM)."""

    mu: int  # tile id of the MU
    lo: int
    hi: int
    bytes: int  # reserved: hi - lo (weights) or (hi - lo) x depth (tile buffers)
    writer: int = -1
    address: int = -1  # byte offset in the MU (set by the address plan)


@dataclass(frozen=True)
class PlacedBuffer:
    name: str  # "weight:Q" or "Q->MHA_GEMM_1"
    kind: str  # "weight" or "tiles"
    producer: str  # kernel writing it ("" for weights: DRAM loads it)
    consumers: tuple[str, ...]
    tile_bytes: int  # per tile (tile buffers) or whole (weights)
    depth: int  # tiles it holds (1 for weights)
    stripes: tuple[Stripe, ...]


@dataclass(frozen=True)
class PlacedKernel:
    name: str
    kind: str
    cus: tuple[int, ...]  # tile ids of its CUs (slot order)


@dataclass(frozen=True)
class PlacedCache:
    """A cache that lives through the whole run and grows each pass (a decode step's KV
    cache): stripes dealt to the CUs of the kernel reading it, each on an MU near its CU."""

    name: str
    reader: str  # kernel reading it every pass
    appender: str  # kernel appending to it every pass ("" if none)
    initial: int  # bytes of each stripe at the start
    growth: int  # bytes each stripe grows per pass
    stripes: tuple[Stripe, ...]  # writer: the appender's CU slot feeding it; lo: the reader's CU slot


@dataclass(frozen=True)
class PlacedPartition:
    index: int
    kernels: tuple[PlacedKernel, ...]
    buffers: tuple[PlacedBuffer, ...]
    traffic: float  # bytes x hops per tile between the partition's CUs and MUs
    traffic_bound: float  # Gilmore-Lawler lower bound on it


@dataclass(frozen=True)
class GridPlacement:
    chip: str
    rows: int
    cols: int
    seed: int
    room: MuRoom  # how the MUs give out room (the memory policy the packing assumed)
    partitions: tuple[PlacedPartition, ...]
    caches: tuple[PlacedCache, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GridPlacement":
        parts = []
        for p in d["partitions"]:
            kernels = tuple(PlacedKernel(k["name"], k["kind"], tuple(k["cus"])) for k in p["kernels"])
            buffers = tuple(PlacedBuffer(b["name"], b["kind"], b["producer"], tuple(b["consumers"]), b["tile_bytes"],
                                         b["depth"], tuple(Stripe(**s) for s in b["stripes"])) for b in p["buffers"])
            parts.append(PlacedPartition(p["index"], kernels, buffers, p["traffic"], p["traffic_bound"]))
        caches = tuple(PlacedCache(c["name"], c["reader"], c["appender"], c["initial"], c["growth"],
                                   tuple(Stripe(**s) for s in c["stripes"])) for c in d.get("caches", ()))
        return cls(d["chip"], d["rows"], d["cols"], d["seed"], MuRoom(**d["room"]), tuple(parts), caches)


def share(total: int, parts: int, i: int) -> tuple[int, int]:
    """Byte range of part ``i`` when ``total`` bytes are cut into ``parts`` near-equal parts."""
    return total * i // parts, total * (i + 1) // parts


def cu_counts(flops: list[float], cores: int, most: int | list[int] = 0) -> list[int]:
    """CUs per kernel in proportion to its FLOPs, at least one each and ``cores`` at most in
    all, and ``most`` at most each (one cap, or one per kernel; 0: no limit): a kernel's
    ideal share beyond its cap goes to the others (water filling), whole CUs by largest
    remainders."""
    n = len(flops)
    if n > cores:
        raise PlacementError(f"{n} kernels for {cores} CUs")
    caps = [c or cores for c in (most if isinstance(most, list) else [most] * n)]
    cores = min(cores, sum(caps))
    ideal = [0.0] * n
    open_ = set(range(n))
    left = float(cores)
    while open_:  # water filling: share what is left among the kernels below their caps
        total = sum(flops[j] for j in open_) or float(len(open_))
        share_ = {j: left * (flops[j] if sum(flops[k] for k in open_) else 1.0) / total for j in open_}
        capped = [j for j in open_ if share_[j] >= caps[j]]
        if not capped:
            for j in open_:
                ideal[j] = share_[j]
            break
        for j in capped:
            ideal[j] = caps[j]
            left -= caps[j]
            open_.discard(j)
    counts = [min(caps[j], max(1, int(ideal[j]))) for j in range(n)]
    while sum(counts) > cores:  # the minimum of one CU each pushed the sum over
        i = max((j for j in range(n) if counts[j] > 1), key=lambda j: (counts[j] - ideal[j], counts[j]))
        counts[i] -= 1
    order = sorted(range(n), key=lambda j: (-(ideal[j] - counts[j]), j))
    for j in order:
        if sum(counts) >= cores:
            break
        if counts[j] < caps[j] and ideal[j] - counts[j] > 0:
            counts[j] += 1
    return counts


@dataclass
class _Piece:
    """A buffer's piece before packing: one writer's share (or a weight), bytes per tile."""

    buffer: int
    lo: int
    hi: int
    depth: int
    writer: int
    readers: float = 1.0  # bytes read per byte of it each tile (every CU reading it counts)

    @property
    def traffic(self) -> float:
        """Bytes through its MU's port each tile: the readers' and (tile buffers) the writer's."""
        return (self.hi - self.lo) * (self.readers + (1 if self.writer >= 0 else 0))

    def cut(self, lo: int, hi: int) -> "_Piece":
        return _Piece(self.buffer, lo, hi, self.depth, self.writer, self.readers)


def _pieces(plan: MappingPlan, kernels: list[KernelPlan], counts: dict[str, int]) -> tuple[list, list[_Piece]]:
    """(buffer descriptions, pieces to pack) of one partition."""
    names = {k.name for k in kernels}
    by_name = {k.name: k for k in kernels}
    buffers, pieces = [], []
    for k in kernels:
        if k.weight_bytes > 0 and not k.streamed:
            w = int(round(k.weight_bytes))
            buffers.append(("weight:" + k.name, "weight", "", (k.name,), w, 1))
            pieces.append(_Piece(len(buffers) - 1, 0, w, 1, -1))  # each byte read once per tile
    for t in plan.tensors:
        if t.on_chip and t.producer in names:
            tb = max(1, int(round(t.tile_bytes)))
            buffers.append((f"{t.producer}->{t.consumer}", "tiles", t.producer, (t.consumer,), tb, t.depth))
            n = counts[t.producer]
            consumer = by_name[t.consumer]
            whole = consumer.kind in GEMM_KINDS and not consumer.role.startswith("experts")
            readers = float(counts[t.consumer]) if whole else 1.0  # every CU reads it all, or its share
            for p in range(n):
                lo, hi = share(tb, n, p)
                if hi > lo:
                    pieces.append(_Piece(len(buffers) - 1, lo, hi, t.depth, p, readers))
    return buffers, pieces


def _room_parts(per_tile: int, depth: int, room: MuRoom) -> int:
    """Stripes a piece of ``per_tile`` bytes a tile, ``depth`` tiles deep, is cut into so that
    each fits one buffer. A buffer of several granules keeps one granule of slack for the
    shares' rounding up (a share is ``per_tile / parts`` rounded up, ``depth`` times); a room
    whose one buffer is one granule (a static slot) has none to spare, so each share's
    ``depth`` tiles must fit the slot itself: at most ``biggest // depth`` bytes a tile."""
    if room.biggest > room.granule:
        return -(-per_tile * depth // (room.biggest - room.granule))
    return -(-per_tile // max(1, room.biggest // depth))


def _cut(pieces: list[_Piece], room: MuRoom, mus: int, port: float) -> list[_Piece]:
    """Pieces cut to what one MU holds and moves: a piece larger than one buffer may be, or
    moving more than ``port`` bytes per tile (what one MU moves while the partition's slowest
    kernel computes a tile), is cut (weights by bytes, tile buffers by a range of every tile's
    bytes). Under a room of a fixed count of buffers an MU each cut piece takes one."""
    cut: list[_Piece] = []
    for pc in pieces:
        per_tile = pc.hi - pc.lo
        room_parts = _room_parts(per_tile, pc.depth, room)
        load_parts = int(-(-pc.traffic // port)) if port > 0 else 1
        parts = max(1, room_parts, min(load_parts, per_tile // max(1, room.granule // pc.depth), mus))
        for i in range(parts):
            lo, hi = share(per_tile, parts, i)
            if hi > lo:
                cut.append(pc.cut(pc.lo + lo, pc.lo + hi))
    return cut


def _pack(cut: list[_Piece], room: MuRoom, mus: int, what: str) -> list[list[_Piece]]:
    """Cut pieces (``_cut``) into at most ``mus`` MUs, balancing the bytes each MU's port moves
    per tile (its SRAM port and its network interface move one word row per cycle, so a crowded
    MU, not the CUs, could set the pace): the heaviest piece goes to the least loaded MU with
    room (longest processing time first, Graham 1969)."""
    bins: list[list[_Piece]] = [[] for _ in range(mus)]
    load = [0.0] * mus
    free = [room.capacity] * mus
    for pc in sorted(cut, key=lambda x: (-x.traffic, x.buffer, x.lo)):
        need = room.reserve((pc.hi - pc.lo) * pc.depth)
        fits = [b for b in range(mus) if free[b] >= need and not (room.per_mu and len(bins[b]) >= room.per_mu)]
        if not fits:
            raise PlacementError(f"{what}: a {need:,} B stripe of buffer {pc.buffer} fits in no MU "
                                 f"(largest room left {max(free):,} B of {room.capacity:,} B)")
        b = min(fits, key=lambda x: (load[x], x))
        bins[b].append(pc)
        load[b] += pc.traffic
        free[b] -= need
    return [b for b in bins if b]


def _flows(kernels: list[KernelPlan], counts: dict[str, int], buffers: list, bins: list[list[_Piece]],
           slot_of: dict[tuple[str, int], int]) -> np.ndarray:
    """[CU slots, bins] bytes per tile between each CU slot and each MU's contents."""
    by_name = {k.name: k for k in kernels}
    F = np.zeros((len(slot_of), len(bins)))
    for b, content in enumerate(bins):
        for pc in content:
            name, bkind, producer, consumers, tb, depth = buffers[pc.buffer]
            if bkind == "tiles":
                F[slot_of[producer, pc.writer], b] += pc.hi - pc.lo  # the writer's share of each tile
            for c in consumers:
                n = counts[c]
                for j in range(n):
                    k = by_name[c]
                    whole = bkind == "tiles" and k.kind in GEMM_KINDS and not k.role.startswith("experts")
                    lo, hi = (0, tb) if whole else share(tb, n, j)
                    F[slot_of[c, j], b] += max(0, min(hi, pc.hi) - max(lo, pc.lo))
    return F


def _distances(spec: ChipSpec, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hops (Manhattan distance on the mesh) between every tile of ``a`` and every tile of ``b``."""
    ra, ca = a // spec.cols, a % spec.cols
    rb, cb = b // spec.cols, b % spec.cols
    return np.abs(ra[:, None] - rb[None, :]) + np.abs(ca[:, None] - cb[None, :])


def _assign(F: np.ndarray, D: np.ndarray, seed: int, restarts: int,
            rounds: int = ROUNDS) -> tuple[np.ndarray, np.ndarray, float]:
    """(CU tile index of each slot, MU tile index of each bin, objective): alternating LAPs.
    A LAP costs O(n^3): on grids of more than LARGE CUs one start and a few rounds."""
    from scipy.optimize import linear_sum_assignment  # here: the simulator imports this module for MuRoom

    slots, bins = F.shape
    if D.shape[0] > LARGE:
        restarts, rounds = 1, min(rounds, 4)
    best = None
    rng = np.random.default_rng(seed)
    for r in range(restarts):
        cu = np.arange(slots) if r == 0 else rng.permutation(D.shape[0])[:slots]
        cost = np.inf
        for _ in range(rounds):
            _, mu = linear_sum_assignment(F.T @ D[cu])  # bins given the CUs
            _, cu_new = linear_sum_assignment(F @ D[:, mu].T)  # CUs given the bins
            new = float((F * D[np.ix_(cu_new, mu)]).sum())
            cu = cu_new
            if new >= cost * (1 - 1e-3):  # less than 0.1 % better: settled
                cost = min(cost, new)
                break
            cost = new
        if best is None or cost < best[2] - 1e-9:
            best = (cu, mu, cost)
    assert best is not None
    return best


def _bound(F: np.ndarray, D: np.ndarray) -> float:
    """Gilmore-Lawler: slot s at CU tile t pays at least its flows, largest first, to the MU
    tiles nearest t; the cheapest assignment of slots to tiles bounds the objective."""
    from scipy.optimize import linear_sum_assignment

    nearest = np.sort(D, axis=1)  # [CU tiles, MU tiles]
    g = np.zeros((F.shape[0], D.shape[0]))
    for s in range(F.shape[0]):
        f = np.sort(F[s][F[s] > 0])[::-1]
        if f.size:
            g[s] = nearest[:, : f.size] @ f
    rows, cols = linear_sum_assignment(g)
    return float(g[rows, cols].sum())


def _shares(plan: MappingPlan, spec: ChipSpec, kernels: list, max_cus: int, stream_bytes: int, by_bytes: bool,
            by_io: bool, min_share: int) -> tuple[list[float], list[int]]:
    """Each kernel's share of a partition's CUs (its work: FLOPs, or the larger of its FLOP and byte
    shares) and the CUs it may use at most (place_on_grid's ``max_cus``, ``stream_bytes``, ``by_bytes``, ``by_io``)."""
    # a CU's share of a tile's output no smaller than MIN_SHARE bytes: finer splits of a
    # small tile cost more messages than they save cycles (every consumer CU of a GEMM
    # reads the whole tile from every producer CU)
    caps = [max(1, min(max_cus, max(int(k.m * k.n * plan.word) // min_share, _stream_cap(k, plan, stream_bytes))))
            for k in kernels]
    work = [k.flop for k in kernels]
    if by_io:  # in FLOPs: what one CU computes while its link moves the kernel's tiles
        rate = spec.cu_flops_per_cycle / (spec.flit_bits / 8)
        work = [max(w, _io_bytes(plan, k) * rate) for w, k in zip(work, kernels)]
    if by_bytes:
        flops = sum(work) or 1.0
        streams = [_streamed(k) for k in kernels]
        total = sum(streams) or 1.0
        work = [max(f / flops, b / total) for f, b in zip(work, streams)]
        caps = [max(c, _stream_cap(k, plan, stream_bytes, _streamed(k))) for c, k in zip(caps, kernels)]
    return work, caps


def _placed_buffers(buffers: list, bins: list, mu_tiles, mu_idx) -> tuple[PlacedBuffer, ...]:
    """The partition's buffers with their stripes on the MU tiles their bins were assigned to."""
    stripes: dict[int, list[Stripe]] = {i: [] for i in range(len(buffers))}
    for b, content in enumerate(bins):
        for pc in content:
            stripes[pc.buffer].append(Stripe(int(mu_tiles[mu_idx[b]]), pc.lo, pc.hi, (pc.hi - pc.lo) * pc.depth,
                                             pc.writer))
    return tuple(PlacedBuffer(name, kind, producer, consumers, tb, depth, tuple(stripes[i]))
                 for i, (name, kind, producer, consumers, tb, depth) in enumerate(buffers))


def place_on_grid(plan: MappingPlan, spec: ChipSpec, seed: int = 0, room: MuRoom | None = None,
                  restarts: int = 2, max_cus: int = 0, stream_bytes: int = 0, rounds: int = ROUNDS,
                  bound: bool = True, by_bytes: bool = False, by_io: bool = False,
                  min_share: int = MIN_SHARE, fit_slots: bool = False) -> GridPlacement:
    """Place every partition of ``plan`` on ``spec``'s grid: the plan of one chip, or of a system
    without pipeline stages (every chip runs the same per-chip slices: TP and DP).

    ``room``: how an MU gives out room under the run's memory policy (default: 64-byte rows);
    ``restarts``: seeded random starting points of the local search (the first is in order);
    ``max_cus``: CUs a kernel may use at most (0: as many as its share of the FLOPs);
    ``stream_bytes``: a kernel streaming its weight may have a CU for every ``stream_bytes`` of
    its weight per tile, whatever its output (0: the output rule alone). Each CU streams its
    share over its own link, so a memory-bound kernel needs CUs in many rows, not only
    enough FLOPs; ``rounds``: alternations of the local search at most; ``bound``: compute
    the Gilmore-Lawler bound (one more assignment problem; 0 reported without it);
    ``by_bytes``: a kernel's CUs in proportion to the larger of its share of the partition's
    FLOPs and of its bytes streamed from off chip (streamed weights, cache reads and appends),
    not of its FLOPs alone: in a memory-bound step every CU's stream then carries about as many
    bytes, and none (attention reading the KV caches on a few CUs) ends long after the rest;
    ``fit_slots``: under a room of a fixed count of buffers an MU (``room.per_mu``: a static
    policy's slots), a partition whose stripes outnumber the MUs' slots has fewer CUs in all,
    taken where they slow its slowest kernel least (``_fewer_cus``), until every stripe has a
    slot: each producer CU writes its own stripe of every tensor it makes, so the CUs, not the
    tile size, set the count (static-allocation compilers' answer, one buffer per memory unit:
    fewer, larger parallel units; SARA, Zhang et al., ISCA 2021; Revet, Rucker et al., HPCA 2024).
    """
    if not plan.feasible:
        raise PlacementError(f"the plan is {plan.status}: {plan.reason}")
    if plan.pp > 1:
        raise PlacementError(f"the plan has {plan.pp} pipeline stages; grid placement takes a plan whose chips all "
                             "run the same partitions (TP and DP)")
    room = room or MuRoom(spec.mu_bytes)
    cu_tiles, mu_tiles = spec.cu_tiles(), spec.mu_tiles()
    D = _distances(spec, cu_tiles, mu_tiles)
    by_name = {k.name: k for k in plan.kernels}
    parts = []
    for part in plan.partitions:
        kernels = [by_name[n] for n in part.kernels]
        work, caps = _shares(plan, spec, kernels, max_cus or len(cu_tiles), stream_bytes, by_bytes, by_io, min_share)
        slots = room.per_mu * len(mu_tiles)  # buffers the MUs hold at most (0: no such count)
        counts = dict(zip(part.kernels, cu_counts(work, len(cu_tiles), caps)))
        while True:
            buffers, pieces = _pieces(plan, kernels, counts)
            stage = max(k.flop_per_tile / counts[k.name] / spec.cu_flops_per_cycle for k in kernels)
            cut = _cut(pieces, room, len(mu_tiles), stage * spec.mu_bytes_per_cycle)
            if not (fit_slots and slots) or len(cut) <= slots or all(
                    counts[b[2]] == 1 for b in buffers if b[1] == "tiles"):
                break
            # every producer CU writes a stripe of each of its tensors: fewer CUs, fewer stripes
            writers = {buffers[pc.buffer][2] for pc in pieces if pc.writer >= 0}  # kernels writing stripes
            counts = _fewer_cus(counts, dict(zip(part.kernels, work)), len(cut) - slots, writers)
        slot_of: dict[tuple[str, int], int] = {}
        for k in kernels:
            for j in range(counts[k.name]):
                slot_of[k.name, j] = len(slot_of)
        need = sum(room.reserve((p.hi - p.lo) * p.depth) for p in pieces)
        if need > len(mu_tiles) * spec.mu_bytes:
            raise PlacementError(f"partition {part.index} needs {need:,} B of MU space; the chip has "
                                 f"{len(mu_tiles)} MUs of {spec.mu_bytes:,} B")
        if slots and len(cut) > slots:
            raise PlacementError(f"partition {part.index} needs {len(cut):,} buffers on {sum(counts.values())} CUs; "
                                 f"the chip's {len(mu_tiles)} MUs hold {room.per_mu} each")
        bins = _pack(cut, room, len(mu_tiles), f"partition {part.index}")
        F = _flows(kernels, counts, buffers, bins, slot_of)
        cu_idx, mu_idx, traffic = _assign(F, D, seed + part.index, restarts, rounds)
        placed_kernels = tuple(
            PlacedKernel(k.name, k.kind,
                         tuple(int(cu_tiles[cu_idx[slot_of[k.name, j]]]) for j in range(counts[k.name])))
            for k in kernels)
        parts.append(PlacedPartition(part.index, placed_kernels, _placed_buffers(buffers, bins, mu_tiles, mu_idx),
                                     traffic, _bound(F, D) if bound else 0.0))
    return GridPlacement(spec.name, spec.rows, spec.cols, seed, room, tuple(parts),
                         _place_caches(plan, parts, spec, room))


def _fewer_cus(counts: dict[str, int], work: dict[str, float], n: int,
               among: set[str] | None = None) -> dict[str, int]:
    """``counts`` with ``n`` CUs fewer (one each at least) taken from the kernels ``among`` (all
    by default), each where it costs least: from the kernel whose work a CU, ``work / CUs``,
    stays smallest with one fewer. A pipeline's pace is its slowest kernel's, and taking CUs one
    at a time this way keeps the largest work a CU as small as any ``n`` fewer can (greedy is
    optimal for a separable minimax: Ibaraki and Katoh, "Resource Allocation Problems:
    Algorithmic Approaches", MIT Press 1988). Taking them in proportion instead
    took one of a 32-token prompt's Q projection's 3 CUs on an 8 x 16 chip, and its streamed
    weight set the layer's pace 1.5 times slower."""
    out = dict(counts)
    for _ in range(n):
        can = [k for k in out if out[k] > 1 and (among is None or k in among)]
        if not can:
            break
        k = min(can, key=lambda j: (work[j] / (out[j] - 1), j))
        out[k] -= 1
    return out


def _stream_cap(k: KernelPlan, plan: MappingPlan, stream_bytes: int, nbytes: float = -1.0) -> int:
    """CUs a streamed weight's kernel (or one streaming ``nbytes`` a pass) may spread its stream
    over (0: no such rule)."""
    if nbytes < 0:
        if not k.streamed or k.weight_bytes <= 0:
            return 0
        nbytes = k.weight_bytes
    if stream_bytes <= 0 or nbytes <= 0:
        return 0
    return int(nbytes / max(1, plan.num_tiles) // stream_bytes)


def _io_bytes(plan: MappingPlan, k: KernelPlan) -> float:
    """Bytes of tiles a kernel reads and writes a pass, if its CUs read shares of its inputs
    (0 if they read them whole: more CUs do not share that traffic). Both count: a CU's reads
    wait for their responses and its writes for its readers' credits, so the two do not fully
    overlap (measured: with the larger alone a 2,048-token prompt's softmax kept one CU and its
    step ran 19 % over its FLOPs; with both it has two and runs 9 % over)."""
    if k.kind in GEMM_KINDS and not k.role.startswith("experts"):
        return 0.0
    return sum(t.tile_bytes for t in plan.tensors if k.name in (t.producer, t.consumer)) * max(1, plan.num_tiles)


def _streamed(k: KernelPlan) -> float:
    """Bytes a kernel streams from off chip a pass: its streamed weight and its cache traffic."""
    return (k.weight_bytes if k.streamed else 0.0) + k.extra_dram_bytes


def _place_caches(plan: MappingPlan, parts: list[PlacedPartition], spec: ChipSpec, room: MuRoom) -> tuple:
    """Each cache a kernel reads (role read:NAME) in MUs for the whole run, if it fits: one stripe
    per reading CU on the nearest MU with room left after every partition's own stripes."""
    readers = {k.role.split(":", 1)[1]: k for k in plan.kernels if k.role.startswith("read:")}
    appenders = {k.role.split(":", 1)[1]: k for k in plan.kernels if k.role.startswith("append:")}
    if not readers:
        return ()
    used: dict[int, int] = {}
    for part in parts:  # an MU's room is what its fullest partition leaves
        here: dict[int, int] = {}
        for b in part.buffers:
            for stripe in b.stripes:
                here[stripe.mu] = here.get(stripe.mu, 0) + room.reserve(stripe.bytes)
        for mu, n in here.items():
            used[mu] = max(used.get(mu, 0), n)
    where = {k.name: k.cus for part in parts for k in part.kernels}
    mu_tiles = spec.mu_tiles()
    caches: list[PlacedCache] = []
    for name, reader in sorted(readers.items()):
        cus = where[reader.name]
        total = int(round(reader.extra_dram_bytes))
        app = appenders.get(name)
        growth = int(round(app.extra_dram_bytes)) if app is not None else 0
        n_app = len(where[app.name]) if app is not None else 1
        # stripes no larger than a buffer may be (leaving room to grow a while), dealt to the
        # reading CUs in turn
        count = max(len(cus), -(-total // max(1, room.biggest // 2)))
        stripes = []
        for s in range(count):
            j = s % len(cus)
            cu = cus[j]
            lo, hi = share(total, count, s)
            need = room.reserve(hi - lo)
            dist = np.abs(mu_tiles // spec.cols - cu // spec.cols) + np.abs(mu_tiles % spec.cols - cu % spec.cols)
            for idx in np.lexsort((mu_tiles, dist)):
                mu = int(mu_tiles[idx])
                if used.get(mu, 0) + need <= room.capacity:
                    used[mu] = used.get(mu, 0) + need
                    stripes.append(Stripe(mu, j, j + 1, hi - lo, s % n_app))
                    break
            else:
                return tuple(caches)  # no room on chip: this cache and the rest stay in DRAM
        g_lo, g_hi = share(growth, count, 0)
        caches.append(PlacedCache(name, reader.name, app.name if app is not None else "", total // count,
                                  g_hi - g_lo, tuple(stripes)))
    return tuple(caches)

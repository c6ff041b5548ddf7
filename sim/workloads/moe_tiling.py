"""moe-tiling: one MoE layer whose SwiGLU experts stream their weights from off chip, per token tile.

STeP's dynamic-tiling study (Sohn et al., "Streaming Tensor Programs", ASPLOS 2026, Figs 9 and
10; its artifact's ``dyn_tiling/test_weight_stationary_gemm*.py``). The layer's tokens are read
from the memory tier one at a time and sent to the experts their routing names (a routing file
as the artifact publishes it). An expert gathers its tokens into *token tiles*: a static tile
holds ``tile`` rows (an expert with n_e tokens runs ceil(n_e / tile) tiles, the last padded), a
dynamic tile (``tile = "dynamic"``) all n_e, its size decided by the routing at run time. Every
tile streams the expert's three weight matrices (gate and up, D x F; down, F x D) from the tier in
``tile_f``-column chunks, as flows: a static size pays one pass over the weights per tile, the
dynamic one pass per active expert.

Units: ``top_k`` scatter CUs (token t is read by scatter t mod top_k, which sends it to each of
its experts: as many scatters as a token has copies, so the scatter's link carries what one load
of the input does), ``top_k`` combiner CUs (token t summed and stored by combiner t mod top_k:
as many as a token has expert rows to gather) and three CUs per active expert: the *gate* CU (the expert's
host: it gathers the tiles into MU buffers and runs the gate projection), the *up* CU and the
*down* CU, each a STeP weight-load operator feeding a matmul (4,096 FLOP/cycle in the artifact:
the chip's CU rate). Per tile the gate and up CUs read the token tile from its MU, then per chunk
ask the tier for the chunk (``prefetch`` chunks in flight: the artifact's channel depth 2) and
multiply the padded tile by it (2 x rows x D x tile_f FLOP); the down CU multiplies each chunk
once the gate and up CUs have finished theirs (SiLU(gate) * up), accumulating the tile's
[rows, D] output in an fp32 MU buffer, then sends the real rows to their tokens' combiners, which store
each token (D fp32 values) once all its experts' rows are in.

Off-chip bytes, the closed form the artifact's numbers follow (test: to the byte):
``3 D F dtype sum_e tiles_e + B D (dtype + accum) + B k dtype``. On-chip bytes two ways: STeP's
accounting (``step_onchip_bytes``: the graph's operators summed, as its scripts count) and what
the MU allocator actually reserved at its peak (the run's ``peak_mu_reserved``): static tile
buffers of ``tile`` rows reserved whole, dynamic ones grown block by block to n_e.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from sim.chip import messages as m
from sim.chip.records import buffer_label
from sim.chip.references import BufferRefused, Ref, allocate, free
from sim.chip.units import Compute, Replies
from sim.keys import Field, Issue, Table
from sim.serving.trace import TraceError
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.base import Floorplan, memory_tier
from sim.workloads.capabilities import Capabilities
from sim.workloads.routing_trace import step_file

TOKEN_TILE = buffer_label(20, "token-tile")
GATHERED = 2  # token tiles an expert holds at once: the one computing and the next (the artifact's channel depth)
ACCUMULATOR = buffer_label(21, "accumulator")
DYNAMIC = 0  # ``tile`` of a dynamic tiling


@WORKLOADS.register("moe-tiling")
@dataclass(frozen=True, eq=False)
class MoeTilingParams(Workload):
    kind: str = "moe-tiling"
    routes: np.ndarray = field(default_factory=lambda: np.zeros((1, 1), dtype=np.int64))  # [tokens, top_k] ids
    experts: int = 8
    hidden: int = 4096  # D
    expert_ffn: int = 14336  # F
    tile: int = DYNAMIC  # token rows per tile; 0: one tile per active expert, sized n_e
    tile_f: int = 64
    dtype_bytes: int = 2  # bf16 weights and activations
    accum_bytes: int = 4  # fp32 accumulators and outputs
    prefetch: int = 2
    source: int = -1  # unit id of the memory tier's controller

    SECTION: ClassVar[str] = "tiling"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
    WORK_UNIT: ClassVar[str] = "token shares"  # a scatter's tokens, read in and (by its combiner) stored
    token_unit: ClassVar[str] = "routed tokens"
    KEYS: ClassVar[Table] = Table({
        "routing": Field("str", "", "STeP routing file (NNN_LLL.npz: array 'data' of [tokens, top_k] expert ids)",
                         file=True),
        "experts": Field("int", 8, "experts E (more than the largest id in the routing)", min=1),
        "hidden": Field("int", 4096, "hidden size D", min=1),
        "expert_ffn": Field("int", 14336, "expert FFN width F (a multiple of tile_f)", min=1),
        "tile": Field("any", "dynamic", "token rows per tile (a whole number), or \"dynamic\": one tile per active "
                      "expert, sized to its tokens"),
        "tile_f": Field("int", 64, "columns of F per weight chunk streamed", min=1),
        "dtype_bytes": Field("int", 2, "bytes per weight and activation element", min=1, unit="bytes"),
        "accum_bytes": Field("int", 4, "bytes per accumulator and output element", min=1, unit="bytes"),
        "prefetch": Field("int", 2, "weight chunks a CU has asked for at once (STeP's channel depth)", min=1),
        "source": Field("str", "", "memory tier the weights and tokens live in (empty: the chip's first)"),
    }, doc="an MoE layer's experts streaming their weights per token tile (STeP's dynamic tiling)")

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "MoeTilingParams":
        spec, lay = chip.on_chip()
        routes = np.zeros((1, 1), dtype=np.int64)
        if not d["routing"]:
            issues.append(Issue("workload.tiling.routing", "required: a STeP routing file (NNN_LLL.npz)"))
        else:
            try:
                routes = step_file(Path(d["routing"]))
            except TraceError as exc:
                issues.append(Issue("workload.tiling.routing", str(exc)))
        tile = d["tile"]
        if tile == "dynamic":
            tile = DYNAMIC
        elif isinstance(tile, bool) or not isinstance(tile, int) or tile < 1:
            issues.append(Issue("workload.tiling.tile", f"{tile!r}: a whole number of rows (at least 1) or "
                                "\"dynamic\""))
            tile = DYNAMIC
        if d["expert_ffn"] % d["tile_f"]:
            issues.append(Issue("workload.tiling.expert_ffn", f"{d['expert_ffn']} is not a multiple of tile_f "
                                f"{d['tile_f']}"))
        if int(routes.max()) >= d["experts"]:
            issues.append(Issue("workload.tiling.experts", f"{d['experts']}: the routing names expert "
                                f"{int(routes.max())}"))
        source = memory_tier(spec, d["source"], "workload.tiling.source", "its weights and tokens", issues)
        p = cls(kind, routes, d["experts"], d["hidden"], d["expert_ffn"], tile, d["tile_f"], d["dtype_bytes"],
                d["accum_bytes"], d["prefetch"], source)
        need = 2 * p.top_k + 3 * len(p.active)
        if need > len(lay.cus):
            issues.append(Issue("chip", f"moe-tiling needs {need} CUs ({p.top_k} scatters and combiners each, 3 per "
                                f"active expert: {len(p.active)}); the {spec.rows}x{spec.cols} grid has "
                                f"{len(lay.cus)}: raise chip.rows and chip.cols"))
        if 2 * len(p.active) > len(lay.mus):
            issues.append(Issue("chip", f"moe-tiling puts each active expert's tile and accumulator on MUs of their "
                                f"own: {2 * len(p.active)} MUs, the grid has {len(lay.mus)}"))
        return p

    # ------------------------------------------------------------------ what the routing decides
    @property
    def tokens(self) -> int:
        return int(self.routes.shape[0])

    @property
    def top_k(self) -> int:
        return int(self.routes.shape[1])

    @property
    def counts(self) -> np.ndarray:
        """n_e: tokens routed to each expert."""
        return np.bincount(self.routes.ravel(), minlength=self.experts)

    @property
    def active(self) -> list[int]:
        """Experts with at least one token, in id order."""
        return [int(e) for e in np.flatnonzero(self.counts)]

    def tiles_of(self, n: int) -> int:
        """Token tiles of an expert with ``n`` tokens (padded static tiles; one dynamic tile)."""
        if n == 0:
            return 0
        return 1 if self.tile == DYNAMIC else -(-n // self.tile)

    def tile_rows(self, n: int, j: int) -> tuple[int, int]:
        """(real rows, rows computed) of tile ``j`` of an expert with ``n`` tokens."""
        if self.tile == DYNAMIC:
            return n, n
        return min(self.tile, n - j * self.tile), self.tile

    def expert_tokens(self, e: int) -> np.ndarray:
        """The tokens routed to expert ``e``, in order (its tiles' rows)."""
        return np.flatnonzero((self.routes == e).any(axis=1))

    @property
    def chunks(self) -> int:
        return self.expert_ffn // self.tile_f

    @property
    def chunk_bytes(self) -> int:
        return self.hidden * self.tile_f * self.dtype_bytes

    # ------------------------------------------------------------------ closed forms
    def offchip_bytes(self) -> int:
        """Bytes moved to and from the memory tier: every tile's three weight matrices, the input
        (D x dtype per token), the output (D x accum per token) and the routing weights (k x
        dtype per token). STeP's artifact: ``3 D F 2 sum_e ceil(n_e / T) + 3 B D 2 + 2 B k``."""
        tiles = sum(self.tiles_of(int(n)) for n in self.counts)
        b, d = self.tokens, self.hidden
        return (3 * d * self.expert_ffn * self.dtype_bytes * tiles + b * d * (self.dtype_bytes + self.accum_bytes)
                + b * self.top_k * self.dtype_bytes)

    def step_onchip_bytes(self) -> int:
        """On-chip bytes as STeP's scripts count them (every operator of the graph's
        ``on_chip_requirement()``, summed, the operators of experts without tokens left out as
        its scripts subtract them): one weight chunk per load operator (3 per expert), three
        fp32 [rows, D] tiles per expert (the gathered tile, its repetition over the chunks, the
        down projection's output; rows = tile, or n_e), and the input row, the routing weight,
        the summed output row and the store's row. The artifact's printed figures follow it to
        the byte (Mixtral and Qwen, batch 64 and 1024; tests/sim/workloads/test_moe_tiling.py)."""
        d, acc, active = self.hidden, self.accum_bytes, len(self.active)
        rows = int(self.counts.sum()) if self.tile == DYNAMIC else active * self.tile
        return (3 * active * self.chunk_bytes + 3 * rows * d * acc + d * self.dtype_bytes + self.dtype_bytes
                + 2 * d * acc)

    @property
    def work_items(self) -> int:
        return self.top_k

    def program(self, cfg) -> "MoeTiling":
        return MoeTiling(self, cfg)

    def figures(self, logged: list, clock_hz: float) -> tuple[dict, dict]:
        return {"offchip_bytes_closed_form": self.offchip_bytes(), "step_onchip_bytes": self.step_onchip_bytes(),
                "token_tiles": int(sum(self.tiles_of(int(n)) for n in self.counts))}, {}


def _spread(plan: Floorplan, k: int, taken: list[int], shift: int = 0) -> list[int]:
    """``k`` CUs not ``taken``, on rows spread evenly over the grid (``shift`` rows down), each
    nearest the middle column of its row: the scatters' tokens leave by rows of their own
    (routes go along the row first), so no row of links carries two scatters' traffic."""
    spec = plan.spec
    out: list[int] = []
    for g in range(k):
        row = min(spec.rows - 1, (2 * g + 1) * spec.rows // (2 * k) + shift)
        here = [int(c) for c in plan.cus if plan.row[c] == row and int(c) not in out + taken]
        if not here:  # more CUs asked for than the rows hold
            here = [int(c) for c in plan.cus if int(c) not in out + taken]
        out.append(min(here, key=lambda c: (abs(int(plan.col[c]) - spec.cols // 2), c)))
    return out


# tags of the messages a CU takes as replies (messages.POSTED): negative, so never a request's
def _row(rank: int) -> int:  # to an expert's gate CU: its token of that rank arrived
    return -1 - 2 * rank


def _end(g: int) -> int:  # to an expert's gate CU: scatter g sent its last token
    return -2 - 2 * g


def _ready(j: int) -> int:  # to an up or down CU: tile j is gathered
    return -1 - 4 * j


def _chunk_done(j: int, i: int, chunks: int, up: bool) -> int:  # to a down CU: gate/up chunk i of tile j
    return -2 - 4 * (j * chunks + i) - (2 if up else 0)


def _up_done(j: int) -> int:  # to an expert's gate CU: the up CU is done with tile j
    return -3 - 4 * j - 4 * 2**40  # apart from _row and _end, which it also receives


def _gathered(j: int) -> int:  # within an expert's gate CU: tile j is gathered
    return -(2**43) - j


def _freed(j: int) -> int:  # within an expert's gate CU: tile j is freed
    return -(2**44) - j


class MoeTiling:
    def __init__(self, p: MoeTilingParams, cfg):
        self.p = p
        self.cfg = cfg
        plan = Floorplan(cfg)
        mus = [int(u) for u in plan.mus]
        k = p.top_k
        self.scatters = _spread(plan, k, [])
        self.combiners = _spread(plan, k, self.scatters, shift=1)
        cus = [int(c) for c in plan.cus if int(c) not in self.scatters + self.combiners]
        self.role: dict[int, tuple[str, int]] = {u: ("scatter", g) for g, u in enumerate(self.scatters)}
        self.role.update({u: ("combiner", c) for c, u in enumerate(self.combiners)})
        self.units: dict[int, tuple[int, int, int]] = {}  # expert -> (gate, up, down) CUs
        self.mus: dict[int, tuple[int, int]] = {}  # expert -> (token tile MU, accumulator MU)
        for i, e in enumerate(p.active):
            trio = tuple(cus[3 * i: 3 * i + 3])
            self.units[e] = trio  # type: ignore[assignment]
            for name, u in zip(("gate", "up", "down"), trio):
                self.role[u] = (name, e)
            self.mus[e] = (mus[(2 * i) % len(mus)], mus[(2 * i + 1) % len(mus)])
        counts = p.counts
        self.tokens_of = {e: p.expert_tokens(e) for e in p.active}
        self.rank = {e: {int(t): r for r, t in enumerate(self.tokens_of[e])} for e in p.active}
        self.n = {e: int(counts[e]) for e in p.active}
        self.flops = cfg.spec.cu_flops_per_cycle
        self.row_bytes = p.hidden * p.dtype_bytes

    def start(self, cu):
        role, idx = self.role.get(cu.uid, ("", -1))
        if role == "scatter":
            return self._scatter(cu, idx)
        if role == "combiner":
            return self._combine(cu, idx)
        if role == "gate":
            return self._gate(cu, idx)
        if role in ("up", "down"):
            return self._project(cu, idx, role)
        return None

    def on_message(self, cu, msg):
        raise RuntimeError(f"moe-tiling CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")

    # ------------------------------------------------------------------ the input
    def _scatter(self, cu, g: int):
        """Read tokens g, g + k, ... from the tier (``prefetch`` in flight) and send each to its
        experts' gate CUs; then tell every gate CU this scatter is done (STeP's stop token)."""
        p, shard = self.p, cu.shard
        shard.counts["admitted"] += 1
        if g == 0:
            tag = cu.request(m.READ_REQ, p.source, nbytes=p.tokens * p.top_k * p.dtype_bytes, arg=cu.uid, buf=-1)
            yield Replies([tag], "memory")  # the routing weights
        mine = list(range(g, p.tokens, p.top_k))
        ask = [cu.request(m.READ_REQ, p.source, nbytes=self.row_bytes, arg=cu.uid, buf=-1)
               for _ in mine[:p.prefetch]]
        for i, t in enumerate(mine):
            yield Replies([ask[i]], "memory")
            if i + p.prefetch < len(mine):
                ask.append(cu.request(m.READ_REQ, p.source, nbytes=self.row_bytes, arg=cu.uid, buf=-1))
            for e in p.routes[t].tolist():
                cu.send(m.WRITE, self.units[e][0], nbytes=self.row_bytes, tag=_row(self.rank[e][t]), flags=m.POSTED)
        for e in p.active:
            cu.send(m.CONTROL, self.units[e][0], tag=_end(g), flags=m.POSTED)

    # ------------------------------------------------------------------ an expert
    def _gate(self, cu, e: int):
        """The expert's host: a task gathering its tiles (``GATHERED`` at most at once: the one
        its matmuls work on and the next, gathered meanwhile), and the gate projection."""
        cu.spawn(self._gather(cu, e))
        return self._project(cu, e, "gate")

    def _gather(self, cu, e: int):
        """Each tile into an MU buffer (static: its ``tile`` rows reserved at once; dynamic: grown
        row by row), then to the up and down CUs and the gate projection."""
        p = self.p
        n, up, down = self.n[e], self.units[e][1], self.units[e][2]
        mu = self.mus[e][0]
        ends = [_end(g) for g in range(p.top_k)]
        for j in range(p.tiles_of(n)):
            if j >= GATHERED:
                yield Replies([_freed(j - GATHERED)], "memory")
            real, rows = p.tile_rows(n, j)
            first = 0 if p.tile == DYNAMIC else j * p.tile
            ref = yield from allocate(cu, mu, 0 if p.tile == DYNAMIC else rows * self.row_bytes, TOKEN_TILE)
            if ref is None:
                raise BufferRefused(f"moe-tiling: MU {mu} refused expert {e}'s token tile {j}")
            waiting = [_row(r) for r in range(first, first + real)]
            if first + real == n:  # the last tile of the expert waits for the stream's end
                waiting += ends
            while waiting:
                got = yield Replies(waiting, "memory", first=True)
                for msg in got.values():
                    if msg.kind == m.WRITE:
                        cu.send(m.APPEND, mu, nbytes=self.row_bytes, mu=ref.mu, buf=ref.buf, alloc=ref.alloc)
                waiting = [t for t in waiting if t not in got]
            cu.send(m.CONTROL, up, tag=_ready(j), nbytes=real, mu=ref.mu, buf=ref.buf, alloc=ref.alloc,
                    flags=m.POSTED)
            cu.send(m.CONTROL, down, tag=_ready(j), nbytes=real, flags=m.POSTED)
            cu.state[("tile", j)] = ref
            cu.signal(_gathered(j))

    def _project(self, cu, e: int, role: str):
        """One of the expert's load operators and its matmul, over all its tiles: the gate or up
        projection (read the token tile, multiply it by each weight chunk, tell the down CU) or
        the down projection (each chunk once the gate and up CUs are done with theirs, into an
        fp32 accumulator whose rows then go to the tokens' combiners). The chunks stream back to
        back across tiles, ``prefetch`` in flight: a tile's first chunks (and its token tile) are
        asked for while the previous tile's last ones compute, once it is gathered, as a load
        operator runs ahead of its matmul by its FIFO."""
        p = self.p
        n, gate, down = self.n[e], self.units[e][0], self.units[e][2]
        count, chunks = p.tiles_of(n), p.chunks
        total = count * chunks
        known: dict[int, tuple] = {}  # tile -> (real rows, rows computed, token tile (MU, buffer, allocation))
        ask: dict[int, int] = {}  # chunk index over all tiles -> its request's tag
        reads: dict[int, int] = {}  # tile -> its token tile's read
        nxt = 0
        ready = _gathered if role == "gate" else _ready

        def take(j: int, msg) -> None:
            real, rows = p.tile_rows(n, j)
            ref = cu.state.pop(("tile", j)) if role == "gate" else msg
            known[j] = (real, rows, (ref.mu, ref.buf, ref.alloc))
            if role != "down":
                mu, buf, alloc = known[j][2]
                reads[j] = cu.request(m.READ_REQ, mu, nbytes=real * self.row_bytes, mu=mu, buf=buf, alloc=alloc)

        def ask_up_to(limit: int) -> None:
            nonlocal nxt
            while nxt < min(total, limit):
                j = nxt // chunks
                if j not in known:
                    msg = cu.arrived(ready(j))
                    if msg is None:
                        return  # not gathered yet: its chunks wait
                    take(j, msg)
                ask[nxt] = cu.request(m.READ_REQ, p.source, nbytes=p.chunk_bytes, arg=cu.uid, buf=-1)
                nxt += 1

        acc = None
        for idx in range(total):
            j, i = divmod(idx, chunks)
            if j not in known:
                got = yield Replies([ready(j)], "control")
                take(j, got[ready(j)])
            ask_up_to(idx + p.prefetch)
            real, rows, ref = known[j]
            if i == 0 and role == "down":
                acc = yield from allocate(cu, self.mus[e][1], rows * p.hidden * p.accum_bytes, ACCUMULATOR)
                if acc is None:
                    raise BufferRefused(f"moe-tiling: MU {self.mus[e][1]} refused expert {e}'s accumulator")
            elif i == 0:
                yield Replies([reads.pop(j)], "memory")  # the token tile is in
            wait = [ask.pop(idx)]
            if role == "down":
                wait += [_chunk_done(j, i, chunks, False), _chunk_done(j, i, chunks, True)]
            yield Replies(wait, "memory")
            ask_up_to(idx + 1 + p.prefetch)
            yield Compute(math.ceil(2 * rows * p.hidden * p.tile_f / self.flops))
            if role != "down":
                cu.send(m.CONTROL, down, tag=_chunk_done(j, i, chunks, role == "up"), flags=m.POSTED)
            if i < chunks - 1:
                continue
            if role == "up":  # done with the token tile
                cu.send(m.CONTROL, gate, tag=_up_done(j), flags=m.POSTED)
            elif role == "gate":  # it and the up CU are done with it
                yield Replies([_up_done(j)], "sync")
                mu, buf, alloc = ref
                free(cu, Ref(mu, buf, alloc))
                cu.signal(_freed(j))
            elif acc is not None:
                self._emit(cu, e, j, real)
                free(cu, acc)

    def _emit(self, cu, e: int, j: int, real: int) -> None:
        """Tile ``j``'s real rows, each to its token's combiner."""
        p = self.p
        first = 0 if p.tile == DYNAMIC else j * p.tile
        rows_to = np.bincount(self.tokens_of[e][first:first + real] % p.top_k, minlength=p.top_k)
        for c, n_rows in enumerate(rows_to.tolist()):
            if n_rows:
                cu.send(m.WRITE, self.combiners[c], nbytes=n_rows * p.hidden * p.accum_bytes,
                        tag=self._out_tag(e, j), flags=m.POSTED)

    # ------------------------------------------------------------------ the output
    def _out_tag(self, e: int, j: int) -> int:
        return -1 - (e * self.p.tokens + j)

    def _combine(self, cu, c: int):
        """Sum the expert rows of tokens c, c + k, ...; store each token (D x accum bytes) once
        all its rows have come."""
        p, shard = self.p, cu.shard
        mine: dict[int, tuple[int, list[int]]] = {}  # tag of a tile's rows -> (expert, its tokens here)
        for e in p.active:
            for j in range(p.tiles_of(self.n[e])):
                real, _ = p.tile_rows(self.n[e], j)
                first = 0 if p.tile == DYNAMIC else j * p.tile
                tokens = [t for t in self.tokens_of[e][first:first + real].tolist() if t % p.top_k == c]
                if tokens:
                    mine[self._out_tag(e, j)] = (e, tokens)
        left = np.full(p.tokens, p.top_k)
        waiting = list(mine)
        stores = []
        while waiting:
            got = yield Replies(waiting, "memory", first=True)
            for tag in got:
                for t in mine[tag][1]:
                    left[t] -= 1
                    if left[t] == 0:
                        stores.append(cu.request(m.WRITE, p.source, nbytes=p.hidden * p.accum_bytes, arg=cu.uid,
                                                 buf=-1))
            waiting = [t for t in waiting if t not in got]
        yield Replies(stores, "memory")
        shard.counts["finished"] += 1
        shard.record("request", c, 0, shard.now, len(range(c, p.tokens, p.top_k)), "ok")

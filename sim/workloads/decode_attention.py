"""attention-par: one decode step's attention over a batch of KV caches of different lengths,
its sequences split over parallel regions statically or dynamically.

STeP's dynamic-parallelisation study (Sohn et al., "Streaming Tensor Programs", ASPLOS 2026,
Figs 14, 15 and 21; its artifact's ``dynamic_par/``): Qwen3-30B-A3B's attention for one KV head
(``queries`` = 8 query heads share it, head dimension 64), each sequence's K and V caches read
from the memory tier in ``tile_n``-row tiles (ceil((L + 1) / tile_n) of them for a cache of L
tokens: the new token is appended to the last tile, which is written back). A region is two
CUs: the K CU streams the K tiles (QK^T and exp per tile) and the V CU the V tiles (x V per
tile, once the K CU's scores for that tile are in), each one of STeP's load operators.

The sequences reach the regions through a dispatcher CU, STeP's partition operator:

- ``coarse``: contiguous groups of ``group`` sequences, one region per group (groups beyond
  ``regions`` wrap around), each region fed by loads of its own: no region waits for another;
- ``interleaved``: sequence s to region s mod ``regions``, through one partition in order;
- ``dynamic``: the first ``regions`` sequences one to each region, then each next one to
  whichever region reports first that it has read all its K tiles (STeP's EagerMerge).

A region holds at most ``channel_depth`` sequences, the one it works on included: an operator
keeps its current element in its input FIFO until it is done with it (it reads, then pops; the
metadata FIFOs, ``metadata_fifo_depth`` deep, are deeper, so the q/k/v FIFO is the one that
fills). The interleaved partition, finding its next region full, waits, and every region behind
it waits too (head-of-line blocking, as in the artifact). A region's slot frees when its K CU has
read the sequence's last K tile. (With the operator taking its element off the FIFO at once, a
region would hold one more; the artifact's interleaved cycles follow one: docs/validation.md.)
The two written-back tiles of a sequence go through a FIFO of ``writeback_fifo_depth``: a CU
with that many write-backs not yet acknowledged waits.

Every sequence is one request of the run (its record: assigned to its output stored).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from sim.chip import messages as m
from sim.chip.units import Compute, Replies
from sim.keys import Field, Issue, Table
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.base import Floorplan, memory_tier
from sim.workloads.capabilities import Capabilities

SCHEDULES = ("coarse", "interleaved", "dynamic")


def read_lengths(path: str) -> np.ndarray:
    """KV lengths of a STeP batch file (``conv_stdevSSSS_START_END.npy``: int64, one per
    sequence); ValueError naming what is wrong."""
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{path}: not a readable .npy file ({exc})") from None
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer) or a.size == 0:
        raise ValueError(f"{path}: expected a 1-D integer array of KV lengths, got {a.dtype} {list(a.shape)}")
    if (a < 0).any():
        raise ValueError(f"{path}: a negative KV length")
    return a.astype(np.int64)


@WORKLOADS.register("attention-par")
@dataclass(frozen=True, eq=False)
class AttentionParParams(Workload):
    kind: str = "attention-par"
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))  # KV tokens per sequence
    schedule: str = "dynamic"
    regions: int = 4
    group: int = 16
    tile_n: int = 32
    head_dim: int = 64
    queries: int = 8  # query heads per KV head
    dtype_bytes: int = 2
    channel_depth: int = 1
    metadata_fifo_depth: int = 16
    writeback_fifo_depth: int = 4
    prefetch: int = 3
    source: int = -1

    SECTION: ClassVar[str] = "attention"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
    WORK_UNIT: ClassVar[str] = "sequences"
    token_unit: ClassVar[str] = "generated tokens"  # one per sequence: a decode step
    KEYS: ClassVar[Table] = Table({
        "lengths_file": Field("str", "", "KV lengths, one per sequence (.npy, e.g. the STeP artifact's "
                              "conv_stdevSSSS_START_END.npy)", file=True),
        "lengths": Field("list", [], "KV lengths, one per sequence (instead of lengths_file)",
                         item=Field("int", min=0)),
        "batch": Field("int", 0, "sequences: the first this many lengths, the list repeated if shorter (0: all)",
                       min=0),
        "schedule": Field("choice", "dynamic", "coarse (contiguous groups), interleaved (s mod regions) or dynamic "
                          "(to the first region free)", choices=SCHEDULES),
        "regions": Field("int", 4, "parallel regions (coarse: at most this many)", min=1),
        "group": Field("int", 16, "coarse: sequences per contiguous group", min=1),
        "tile_n": Field("int", 32, "cache rows per KV tile", min=1),
        "head_dim": Field("int", 64, "head dimension", min=1),
        "queries": Field("int", 8, "query heads sharing the KV head", min=1),
        "dtype_bytes": Field("int", 2, "bytes per element", min=1, unit="bytes"),
        "channel_depth": Field("int", 1, "a region's q/k/v input FIFO, in sequences", min=1),
        "metadata_fifo_depth": Field("int", 16, "a region's metadata FIFOs, in sequences", min=1),
        "writeback_fifo_depth": Field("int", 4, "written-back cache tiles a CU may have unacknowledged", min=1),
        "prefetch": Field("int", 3, "KV tiles a CU has asked the tier for at once: enough that a load streams at its "
                          "unit's rate whatever its NoC distance to the memory (docs/validation.md, STeP)", min=1),
        "source": Field("str", "", "memory tier the KV caches live in (empty: the chip's first)"),
    }, doc="decode attention over KV caches of different lengths on parallel regions (STeP's dynamic "
           "parallelisation)")

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "AttentionParParams":
        spec, lay = chip.on_chip()
        lengths = np.zeros(1, dtype=np.int64)
        if d["lengths_file"] and d["lengths"]:
            issues.append(Issue("workload.attention.lengths", "give lengths or lengths_file, not both"))
        elif d["lengths_file"]:
            try:
                lengths = read_lengths(d["lengths_file"])
            except ValueError as exc:
                issues.append(Issue("workload.attention.lengths_file", str(exc)))
        elif d["lengths"]:
            lengths = np.array(d["lengths"], dtype=np.int64)
        else:
            issues.append(Issue("workload.attention.lengths_file", "required: the batch's KV lengths (or lengths)"))
        if d["batch"]:
            lengths = np.resize(lengths, d["batch"])  # the artifact's batch sweep repeats its list
        source = memory_tier(spec, d["source"], "workload.attention.source", "its KV caches", issues)
        p = cls(kind, lengths, d["schedule"], d["regions"], d["group"], d["tile_n"], d["head_dim"], d["queries"],
                d["dtype_bytes"], d["channel_depth"], d["metadata_fifo_depth"], d["writeback_fifo_depth"],
                d["prefetch"], source)
        need = 1 + 2 * p.region_count
        if need > len(lay.cus):
            issues.append(Issue("chip", f"attention-par needs {need} CUs (a dispatcher and 2 per region); the "
                                f"{spec.rows}x{spec.cols} grid has {len(lay.cus)}"))
        return p

    # ------------------------------------------------------------------ what the lengths decide
    @property
    def batch(self) -> int:
        return int(len(self.lengths))

    @property
    def tiles(self) -> np.ndarray:
        """KV tiles of each sequence: room for its cache and the new token."""
        return (self.lengths + self.tile_n) // self.tile_n

    @property
    def region_count(self) -> int:
        if self.schedule == "coarse":
            return min(self.regions, -(-self.batch // self.group))
        return self.regions

    def static_region(self, s: int) -> int:
        """The region a static schedule gives sequence ``s``."""
        if self.schedule == "coarse":
            return (s // self.group) % self.region_count
        return s % self.regions

    @property
    def slots(self) -> int:
        """Sequences a region holds at once, the one being worked on included (it stays in the
        FIFO until done)."""
        return min(self.channel_depth, self.metadata_fifo_depth)

    @property
    def tile_bytes(self) -> int:
        return self.tile_n * self.head_dim * self.dtype_bytes

    def offchip_bytes(self) -> int:
        """Bytes to and from the tier: every K and V tile read, the last of each written back,
        each sequence's query and new key and value read and its output written."""
        row = self.head_dim * self.dtype_bytes
        per_seq = 2 * self.tile_bytes + (self.queries + 2) * row + self.queries * row
        return int(2 * self.tile_bytes * self.tiles.sum()) + self.batch * per_seq

    @property
    def work_items(self) -> int:
        return self.batch

    def program(self, cfg) -> "AttentionPar":
        return AttentionPar(self, cfg)

    def figures(self, logged: list, clock_hz: float) -> tuple[dict, dict]:
        return {"offchip_bytes_closed_form": self.offchip_bytes(), "kv_tiles": int(self.tiles.sum())}, {}


# tags of the messages a CU takes as replies (messages.POSTED): negative, so never a request's
def _assign(n: int) -> int:  # to a region's K or V CU: its n-th sequence (nbytes: which; -1: no more)
    return -1 - 2 * n


def _scores(n: int, i: int) -> int:  # to a V CU: the K CU's scores of tile i of its n-th sequence
    return -2 - 2 * (n * 2**24 + i)


def _free(r: int, n: int) -> int:  # to the dispatcher: region r has read all K tiles of its n-th sequence
    return -1 - (n * 2**10 + r)


class AttentionPar:
    def __init__(self, p: AttentionParParams, cfg):
        self.p = p
        self.cfg = cfg
        cus = [int(c) for c in Floorplan(cfg).cus]
        self.dispatcher = cus[0]
        self.k_cu = cus[1:1 + p.region_count]
        self.v_cu = cus[1 + p.region_count:1 + 2 * p.region_count]
        self.region = {u: r for r, u in enumerate(self.k_cu)} | {u: r for r, u in enumerate(self.v_cu)}
        self.flops = cfg.spec.cu_flops_per_cycle
        self.row = p.head_dim * p.dtype_bytes
        # QK^T and A.V of one tile: 2 x queries x tile_n x head_dim FLOP each
        self.tile_cycles = math.ceil(2 * p.queries * p.tile_n * p.head_dim / self.flops)

    def start(self, cu):
        if cu.uid == self.dispatcher:
            return self._dispatch(cu)
        if cu.uid in self.k_cu or cu.uid in self.v_cu:
            return self._region(cu, cu.uid in self.k_cu)
        return None

    def on_message(self, cu, msg):
        raise RuntimeError(f"attention-par CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")

    # ------------------------------------------------------------------ the partition
    def _send(self, cu, r: int, n: int, s: int) -> None:
        for u in (self.k_cu[r], self.v_cu[r]):
            cu.send(m.CONTROL, u, tag=_assign(n), nbytes=s, flags=m.POSTED)
        if s >= 0:
            cu.shard.counts["admitted"] += 1

    def _dispatch(self, cu):
        p = self.p
        regions = p.region_count
        given = [0] * regions  # sequences sent to each region
        freed = [0] * regions  # of which it has read every K tile
        if p.schedule == "dynamic":
            order = iter(range(p.batch))
            for r in range(min(regions, p.batch)):
                self._send(cu, r, 0, next(order))
                given[r] = 1
            for s in order:  # the next sequence to the first region that frees
                got = yield Replies([_free(r, freed[r]) for r in range(regions)], "control", first=True)
                r = min(self.region_of_free(t) for t in got)
                for t in got:
                    rr = self.region_of_free(t)
                    if rr != r:  # came at once: kept for the next round
                        cu.early[t] = got[t]
                freed[r] += 1
                self._send(cu, r, given[r], s)
                given[r] += 1
        elif p.schedule == "interleaved":
            for s in range(p.batch):  # in order: a full region holds up every sequence behind it
                r = p.static_region(s)
                while given[r] - freed[r] >= p.slots:
                    yield Replies([_free(r, freed[r])], "control")
                    freed[r] += 1
                self._send(cu, r, given[r], s)
                given[r] += 1
        else:  # coarse: each region's own sequences, in order, as soon as it has room
            queues = [[s for s in range(p.batch) if p.static_region(s) == r] for r in range(regions)]
            while any(given[r] < len(queues[r]) for r in range(regions)):
                for r in range(regions):
                    while given[r] < len(queues[r]) and given[r] - freed[r] < p.slots:
                        self._send(cu, r, given[r], queues[r][given[r]])
                        given[r] += 1
                busy = [r for r in range(regions) if given[r] < len(queues[r])]
                if busy:
                    got = yield Replies([_free(r, freed[r]) for r in busy], "control", first=True)
                    for t in got:
                        freed[self.region_of_free(t)] += 1
        for r in range(regions):
            self._send(cu, r, given[r], -1)

    def region_of_free(self, tag: int) -> int:
        return (-1 - tag) % 2**10

    # ------------------------------------------------------------------ a region
    def _ask(self, cu, nbytes: int) -> int:
        return cu.request(m.READ_REQ, self.p.source, nbytes=nbytes, arg=cu.uid, buf=-1)

    def _write_back(self, cu, pending: list):
        """Write a cache tile back through the FIFO: wait while it is full."""
        p = self.p
        if len(pending) >= p.writeback_fifo_depth:
            yield Replies([pending.pop(0)], "memory")
        pending.append(cu.request(m.WRITE, p.source, nbytes=p.tile_bytes, arg=cu.uid, buf=-1))

    def _tiles(self, cu, n: int, s: int, pending: list, k: bool):
        """Stream sequence ``s``'s K (or V) tiles, ``prefetch`` in flight; per tile its compute."""
        p = self.p
        count = int(p.tiles[s])
        ask = [self._ask(cu, p.tile_bytes) for _ in range(min(p.prefetch, count))]
        for i in range(count):
            wait = [ask[i]] if k else [ask[i], _scores(n, i)]
            yield Replies(wait, "memory")
            if i + p.prefetch < count:
                ask.append(self._ask(cu, p.tile_bytes))
            if k and i == count - 1:  # every K tile read: the partition may send this region another
                cu.send(m.CONTROL, self.dispatcher, tag=_free(self.region[cu.uid], n), flags=m.POSTED)
            yield Compute(self.tile_cycles)
            if k:
                cu.send(m.CONTROL, self.v_cu[self.region[cu.uid]], tag=_scores(n, i), flags=m.POSTED)
            if i == count - 1:  # the last tile, the new token appended: written back
                yield from self._write_back(cu, pending)

    def _region(self, cu, k: bool):
        """A region's K CU (``k``: the query heads and new key, then the K tiles) or V CU (the new
        value, the V tiles, then the output's store, an operator of its own: the region goes on);
        a sequence's record runs from its assignment to its output's store."""
        p, n = self.p, 0
        pending: list[int] = []
        while True:
            got = yield Replies([_assign(n)], "control")
            s = got[_assign(n)].nbytes
            if s < 0:
                break
            t0 = cu.shard.now
            tag = self._ask(cu, (p.queries + 1 if k else 1) * self.row)
            yield Replies([tag], "memory")
            yield from self._tiles(cu, n, s, pending, k)
            if not k:
                cu.spawn(self._output(cu, s, t0))
            n += 1
        if pending:
            yield Replies(pending, "memory")

    def _output(self, cu, s: int, t0: int):
        shard = cu.shard
        tag = cu.request(m.WRITE, self.p.source, nbytes=self.p.queries * self.row, arg=cu.uid, buf=-1)
        yield Replies([tag], "memory")
        shard.counts["finished"] += 1
        shard.record("request", s, t0, shard.now, 1, "ok")

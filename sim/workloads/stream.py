"""stream: weight matrices streamed from a memory to the CUs, multiplied as they arrive.

A matrix-vector (``batch = 1``) or matrix-matrix product with weights off chip, the shape of
a decode step's weight traffic: every streaming CU takes an equal share of each matrix's rows
(the matrices in order, ``repeat`` times: a model's layers), asks its memory for its bytes in
chunks of ``chunk`` with ``prefetch`` chunks in flight (a DMA engine's queue) and computes
``2 x batch`` FLOP per weight element of a chunk once it is in (a lane x stage unit retires a
fused multiply-add per cycle), while the next chunks come: compute and transfer overlap
ideally. Its known answer is the roofline: ``max(bytes / bandwidth, FLOPs / peak)``, the
bandwidth being the tightest of the memory's, each CU's interface link and each edge port's
(``roofline_cycles``); DFModel's and every roofline model's figure.

The memory is a tier of the chip (``source = "hbm"``), its first tier, or on a chip without
tiers each CU's DRAM interface (the nearer edge of its row); ``noc.bulk`` decides whether
the interfaces' data moves in packets or as flows (the flow-vs-packet validation). With
``copy_to`` another tier, the CUs have the bytes copied there instead (a model switch: DDR to
HBM), each chunk a flow at the slower tier's bandwidth; its known answer is bytes over that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from mapping.placement import share
from sim.chip import messages as m
from sim.chip.spec import CU, tier_unit
from sim.chip.units import Compute, Replies
from sim.keys import Field, Issue, Table
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.base import tile_field, tile_of
from sim.workloads.capabilities import Capabilities

KiB = 1024


@WORKLOADS.register("stream")
@dataclass(frozen=True)
class StreamParams(Workload):
    kind: str = "stream"
    source: str = ""  # a tier's name; empty: the chip's DRAM
    matrices: tuple[tuple[int, int], ...] = ((4096, 4096),)  # (rows, cols) of each weight matrix, in order
    repeat: int = 1
    batch: int = 1  # activation columns: 2 x batch FLOP per weight element (0: transfers only)
    word: int = 2
    chunk: int = 256 * KiB
    prefetch: int = 2
    copy_to: str = ""  # a tier the bytes are copied into instead (a model switch); empty: multiplied
    cus: tuple[int, ...] = ()  # unit ids of the streaming CUs, in order
    sources: tuple[int, ...] = ()  # per streaming CU, the unit id of its memory
    roofline_cycles: float = 0.0  # the closed form (module docstring)
    memory_cycles: float = 0.0
    compute_cycles: float = 0.0

    SECTION: ClassVar[str] = "stream"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=False, maps_graph=False)
    WORK_UNIT: ClassVar[str] = "streams"
    token_unit: ClassVar[str] = "tokens"  # batch columns through every matrix: a decode step's tokens
    KEYS: ClassVar[Table] = Table({
        "source": Field("str", "", "memory tier the weights live in (e.g. \"hbm\", \"ddr\"); empty: the chip's "
                        "DRAM (its first tier, or each CU's DRAM interface)"),
        "matrices": Field("list", [[4096, 4096]], "[rows, cols] of each weight matrix, streamed in order",
                          item=Field("list", item=Field("int", min=1))),
        "repeat": Field("int", 1, "times the matrices are streamed (a model's layers)", min=1),
        "batch": Field("int", 1, "activation columns (tokens): 2 x batch FLOP per weight element; 0: transfers "
                       "only", min=0),
        "word": Field("int", 2, "bytes per weight element", min=1),
        "chunk": Field("size", 256 * KiB, "bytes a CU asks its memory for at once", min=1),
        "prefetch": Field("int", 2, "chunks a CU has asked for at once", min=1),
        "copy_to": Field("str", "", "a memory tier the bytes are copied into from source instead of being "
                         "multiplied (a model switch: source = \"ddr\", copy_to = \"hbm\"); empty: none"),
        "cus": Field("list", [], "[row, col] of each streaming CU (empty: every CU)", item=tile_field([0, 0], "")),
    }, doc="weights streamed from a memory tier and multiplied as they arrive (a decode step's weight traffic)")

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "StreamParams":
        spec, lay = chip.on_chip()
        mats = []
        for i, mat in enumerate(d["matrices"]):
            if len(mat) != 2:
                issues.append(Issue(f"workload.stream.matrices[{i}]", f"expected [rows, cols], got {mat!r}"))
            else:
                mats.append((int(mat[0]), int(mat[1])))
        if d["cus"]:
            tiles = [tile_of(t, f"workload.stream.cus[{i}]", spec, lay, CU, issues) for i, t in enumerate(d["cus"])]
            cus = tuple(r * spec.cols + c for t in tiles if t for r, c in [t])
        else:
            cus = tuple(int(u) for u in lay.cus.tolist())
        if len(set(cus)) != len(cus):
            issues.append(Issue("workload.stream.cus", "names a CU twice"))
        source = d["source"]
        if source and source not in {t.name for t in spec.tiers}:
            known = ", ".join(t.name for t in spec.tiers) or "none: leave it empty for its DRAM"
            issues.append(Issue("workload.stream.source", f"{source!r}: chip {spec.name!r} has no such memory tier "
                                f"(its tiers: {known})"))
            source = ""
        copy_to = d["copy_to"]
        if copy_to and (copy_to not in {t.name for t in spec.tiers} or copy_to == (source or spec.tiers[0].name)):
            issues.append(Issue("workload.stream.copy_to", f"{copy_to!r}: a memory tier of chip {spec.name!r} other "
                                f"than the source (its tiers: {', '.join(t.name for t in spec.tiers) or 'none'})"))
            copy_to = ""
        sources = tuple(_memory_of(spec, lay, cu, source) for cu in cus)
        p = cls(kind, d["source"], tuple(mats), d["repeat"], 0 if copy_to else d["batch"], d["word"], d["chunk"],
                d["prefetch"], copy_to, cus, sources)
        mem, comp = p.closed_form(spec, chip)
        return cls(kind, p.source, p.matrices, p.repeat, p.batch, p.word, p.chunk, p.prefetch, copy_to, cus,
                   sources, max(mem, comp), mem, comp)

    def share_bytes(self, j: int) -> int:
        """Bytes streaming CU ``j`` moves: its share of every matrix's rows, ``repeat`` times."""
        n = len(self.cus)
        per = sum((hi - lo) * cols * self.word for rows, cols in self.matrices for lo, hi in [share(rows, n, j)])
        return per * self.repeat

    def closed_form(self, spec, chip: ChipContext) -> tuple[float, float]:
        """(memory cycles, compute cycles) of the roofline: bytes over the tightest bandwidth (each
        memory's, each CU's link, each edge port's), FLOPs over the streaming CUs' peak."""
        clock = spec.clock_hz
        link = _link_rate(spec)
        by_source: dict[int, int] = {}
        by_port: dict[tuple[int, int], int] = {}
        worst_cu = 0.0
        flops = 0.0
        for j, (cu, src) in enumerate(zip(self.cus, self.sources)):
            b = self.share_bytes(j)
            by_source[src] = by_source.get(src, 0) + b
            worst_cu = max(worst_cu, b / link)
            row = cu // spec.cols
            port = (src, row) if spec.tiers else (src, -1)
            by_port[port] = by_port.get(port, 0) + b
            flops += 2.0 * self.batch * b / self.word
        mem = 0.0 if self.copy_to else max(worst_cu, max(by_port.values(), default=0) / link)
        into = spec.tiers[spec.tier_index(self.copy_to)].bytes_per_cycle(clock) if self.copy_to else math.inf
        for src, b in by_source.items():  # a copy between tiers crosses no link: the slower tier sets it
            bw = spec.tiers[src - spec.tiles].bytes_per_cycle(clock) if spec.tiers else spec.dram_bytes_per_cycle
            mem = max(mem, b / min(bw, into))
        comp = flops / (len(self.cus) * spec.cu_flops_per_cycle) if self.cus else 0.0
        return mem, comp

    @property
    def work_items(self) -> int:
        return len(self.cus)

    def program(self, cfg) -> "Stream":
        return Stream(self, cfg)

    def figures(self, logged: list, clock_hz: float) -> tuple[dict, dict]:
        return {"stream_bytes": sum(self.share_bytes(j) for j in range(len(self.cus))),
                "roofline_seconds": self.roofline_cycles / clock_hz,
                "roofline_memory_seconds": self.memory_cycles / clock_hz,
                "roofline_compute_seconds": self.compute_cycles / clock_hz}, {}


def _link_rate(spec) -> float:
    """Data bytes a cycle over one link in full packets (messages.Sizing.link_data_rate) at the
    default packet size: what a flow through a link is held to."""
    return m.Sizing(flit_bits=spec.flit_bits).link_data_rate()


def _memory_of(spec, lay, cu: int, source: str) -> int:
    """Unit id of the memory a CU streams from: the named tier, the first tier, or the DRAM
    interface of the nearer edge of its row."""
    if spec.tiers:
        return tier_unit(spec, source or spec.tiers[0].name)
    r, c = divmod(int(lay.tile[cu]), spec.cols)
    return spec.tiles + (r if c < spec.cols - 1 - c else spec.rows + r)


class Stream:
    def __init__(self, p: StreamParams, cfg):
        self.p = p
        self.cfg = cfg
        self.index = {cu: j for j, cu in enumerate(p.cus)}
        self.flops_per_cycle = cfg.spec.cu_flops_per_cycle
        self.into = tier_unit(cfg.spec, p.copy_to) if p.copy_to else -1

    def start(self, cu):
        j = self.index.get(cu.uid)
        return self._stream(cu, j) if j is not None else None

    def on_message(self, cu, msg):
        raise RuntimeError(f"stream CU {cu.uid} got an unexpected {m.KINDS[msg.kind]} message")

    def _stream(self, cu, j: int):
        p, shard = self.p, cu.shard
        shard.counts["admitted"] += 1
        t0 = shard.now
        total = p.share_bytes(j)
        chunks = [min(p.chunk, total - lo) for lo in range(0, total, p.chunk)]
        src = p.sources[j]

        def ask(n: int) -> int:
            if self.into >= 0:  # the source tier copies the chunk into the other and acknowledges
                return cu.request(m.CONTROL, src, arg=m.CTRL_COPY, buf=self.into, nbytes=n)
            return cu.request(m.READ_REQ, src, nbytes=n, arg=cu.uid, buf=-1)

        ahead = [ask(chunks[i]) for i in range(min(p.prefetch, len(chunks)))]
        failed = False
        for i, n in enumerate(chunks):
            got = yield Replies([ahead.pop(0)], "memory")
            failed = failed or any(r.status != m.STATUS_OK for r in got.values())
            if i + p.prefetch < len(chunks):
                ahead.append(ask(chunks[i + p.prefetch]))
            cycles = math.ceil(2 * p.batch * (n // p.word) / self.flops_per_cycle)
            if cycles:
                yield Compute(cycles)
        shard.counts["finished"] += 1
        shard.record("request", j, t0, shard.now, p.batch if j == 0 else 0, "failed" if failed else "ok")

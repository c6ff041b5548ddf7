"""Mixture-of-Experts expert parallelism over box chips: every chip holds ``experts / p`` of a
layer's experts and ``tokens`` tokens a step; a token goes to its ``top_k`` experts (Zipf
popularity, the same draw as sim/workloads/moe.py) wherever they live. A step is an
all-to-all whose message sizes are the routing's counts (dispatch), the experts' FFNs on what
landed, and the all-to-all back (combine), as in GShard / Switch Transformer expert
parallelism. Skew makes the hot experts' chips receive and compute more, so the step waits
for them; the landing buffer a chip needs is what it received, not the static worst case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from sim.keys import Field, Issue, Table
from sim.system.programs import span_cycles
from sim.system.shard import BoxChip, Compute, Recv
from sim.workloads import WORKLOADS, ChipContext, Workload
from sim.workloads.capabilities import Capabilities
from sim.workloads.moe import route


@WORKLOADS.register("expert-parallel")
@dataclass(frozen=True)
class ExpertParallelParams(Workload):
    kind: str = "expert-parallel"
    dim: int = 0
    experts: int = 8
    top_k: int = 2
    tokens: int = 512
    hidden: int = 4096
    ffn: int = 14336
    word: int = 2
    steps: int = 4
    skew: float = 1.0

    SECTION: ClassVar[str] = "experts"
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(system=True, maps_graph=False)
    token_unit: ClassVar[str] = "routed tokens"  # a system run reports no tokens: the unit they would be in
    KEYS: ClassVar[Table] = Table({
        "dim": Field("int", 0, "network dimension whose groups share the experts (0 = the first [[system.network]])",
                     min=0),
        "experts": Field("int", 8, "experts of the layer (a multiple of the group's chips)", min=1),
        "top_k": Field("int", 2, "experts per token", min=1),
        "tokens": Field("int", 512, "tokens a chip routes per step", min=1),
        "hidden": Field("int", 4096, "model width (elements of a token's activation)", min=1),
        "ffn": Field("int", 14336, "expert FFN width", min=1),
        "word": Field("int", 2, "bytes per element", min=1),
        "steps": Field("int", 4, "steps (one layer's dispatch, experts, combine) in a row", min=1),
        "skew": Field("float", 1.0, "Zipf exponent of expert popularity (0: uniform)", min=0.0),
    }, doc="MoE expert parallelism: data-dependent all-to-alls over box chips")

    @classmethod
    def from_config(cls, kind: str, d: dict, chip: ChipContext, issues: list[Issue]) -> "ExpertParallelParams":
        p = cls(kind, d["dim"], d["experts"], d["top_k"], d["tokens"], d["hidden"], d["ffn"], d["word"], d["steps"],
                d["skew"])
        system = chip.system
        if system is not None:
            if p.dim >= len(system.network):
                issues.append(Issue("workload.experts.dim", f"{p.dim}: the system has {len(system.network)} "
                                    "network dimension(s)"))
            elif p.experts % system.network[p.dim].size:
                issues.append(Issue("workload.experts.experts", f"{p.experts} experts do not spread evenly over "
                                    f"{system.network[p.dim].size} chips"))
        if p.top_k > p.experts:
            issues.append(Issue("workload.experts.top_k", f"{p.top_k} exceeds the {p.experts} experts"))
        return p

    @property
    def token_bytes(self) -> int:
        return self.hidden * self.word

    @property
    def work_items(self) -> int:
        return self.steps

    def system_program(self, cfg) -> "ExpertParallel":
        return ExpertParallel(self, cfg)

    def system_figures(self, records: list, cfg) -> dict:
        """Step times, and what skew did: the most tokens a chip's experts took against the
        mean, and the landing buffer that took against a static worst-case reservation."""
        times = span_cycles(records)
        landed = np.array([r.nbytes for r in records], dtype=np.int64) // self.token_bytes
        prog = ExpertParallel(self, cfg)
        return {"step_cycles": times, "step_seconds_mean": float(np.mean(times)) / cfg.clock_hz if times else 0.0,
                "balanced_step_cycles": prog.balanced_cycles(),
                "tokens_landed_max": int(landed.max()) if landed.size else 0,
                "tokens_landed_mean": float(landed.mean()) if landed.size else 0.0,
                "expert_imbalance": float(landed.max() / landed.mean()) if landed.size and landed.mean() else 1.0,
                "landing_bytes_peak": int(landed.max()) * self.token_bytes if landed.size else 0,
                "landing_bytes_static": prog.static_landing_bytes()}


class ExpertParallel:
    def __init__(self, p: ExpertParallelParams, cfg):
        self.p = p
        self.cfg = cfg
        self.graph = cfg.graph
        chip = cfg.system.chip
        self.flops_per_cycle = chip.peak_flops / cfg.clock_hz
        self.group_size = self.graph.sizes[p.dim]
        self.per_chip = p.experts // self.group_size

    def expert_cycles(self, tokens: int) -> int:
        """An expert FFN over ``tokens`` tokens: two GEMMs, hidden x ffn each, 2 flops per MAC."""
        return math.ceil(4 * tokens * self.p.hidden * self.p.ffn / self.flops_per_cycle)

    def counts(self, chip: int, step: int) -> np.ndarray:
        """Tokens chip ``chip`` sends to each chip of its group in ``step`` (a token counted once
        per expert it picked there)."""
        p, g = self.p, self.group_size
        experts = route(self.cfg.seed, step * self.graph.chips + chip, p.tokens, p.experts, p.top_k, p.skew)
        return np.bincount((experts // self.per_chip).ravel(), minlength=g)

    def balanced_cycles(self) -> int:
        """A step if every chip received the mean (tokens x top_k) on idle fully connected links."""
        p, g = self.p, self.group_size
        dim = self.cfg.system.network[p.dim]
        bpc = dim.link_bandwidth / self.cfg.clock_hz
        lat = max(1, round(dim.link_latency * self.cfg.clock_hz))
        piece = p.tokens * p.top_k // g * p.token_bytes
        a2a = (g - 1) * math.ceil(piece / bpc) + lat if g > 1 else 0
        return 2 * a2a + self.expert_cycles(p.tokens * p.top_k)

    def static_landing_bytes(self) -> int:
        """What a static reservation must hold: every token of every chip of the group picking
        as many of this chip's experts as it may."""
        p = self.p
        return self.group_size * p.tokens * min(p.top_k, self.per_chip) * p.token_bytes

    def start(self, chip: BoxChip):
        return self._run(chip)

    def _run(self, chip: BoxChip):
        p, shard = self.p, chip.shard
        group = self.graph.group(chip.cid, p.dim)
        me = group.index(chip.cid)
        peers = [c for c in group if c != chip.cid]
        for r in range(p.steps):
            t0 = shard.now
            if chip.cid == group[0]:
                shard.counts["created"] += 1
            sent = self.counts(chip.cid, r)
            for j, c in enumerate(group):  # dispatch: every peer learns its count from the message's size
                if c != chip.cid:
                    chip.send(c, int(sent[j]) * p.token_bytes, 2 * r)
            got = yield Recv([(c, 2 * r) for c in peers]) if peers else {}
            landed = int(sent[me]) + sum(n // p.token_bytes for n in got.values())
            yield Compute(self.expert_cycles(landed))
            for (c, _), n in got.items():  # combine: each token's result back to its chip
                chip.send(c, n, 2 * r + 1)
            if peers:
                yield Recv([(c, 2 * r + 1) for c in peers])
            shard.record("expert_step", chip.cid, r, t0, shard.now, landed * p.token_bytes)
            if chip.cid == group[0]:
                shard.counts["finished"] += 1

"""spec-decode: kv-decode whose every step drafts tokens the target model verifies.

Speculative decoding (Leviathan et al., ICML 2023): a step appends ``draft + 1`` tokens to
every KV buffer, the target verifies them, ``a`` of the ``draft`` are accepted (each with
probability ``accept``, stopping at the first rejection) and the rejected ``draft - a`` are
truncated from every KV buffer; the step yields ``a + 1`` tokens. The rest (admission,
layers, preemption, prefix sharing) is kv-decode's (kv_decode.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim import rng
from sim.chip import messages as m
from sim.keys import Field, Table
from sim.serving.lengths import STREAM_ACCEPT
from sim.workloads import WORKLOADS
from sim.workloads.kv_decode import KvDecode, KvParams


@WORKLOADS.register("spec-decode")
@dataclass(frozen=True)
class SpecParams(KvParams):
    kind: str = "spec-decode"
    draft: int = 4  # draft tokens a step appends besides the bonus token
    accept: float = 0.7  # probability each draft token is accepted

    KEYS: ClassVar[Table]  # set below the class (it reads the defaults)

    @classmethod
    def kind_fields(cls, d: dict) -> dict:
        return {"draft": d["draft"], "accept": d["accept"]}

    def program(self, cfg) -> "SpecDecode":
        return SpecDecode(self, cfg)


SpecParams.KEYS = Table({
    **KvParams.KEYS.fields,
    "draft": Field("int", SpecParams.draft, "spec-decode: draft tokens per step", min=1),
    "accept": Field("float", SpecParams.accept, "spec-decode: acceptance probability of each draft token", min=0.0,
                    max=1.0),
}, doc=KvParams.KEYS.doc)


class SpecDecode(KvDecode):
    """The program every CU of a spec-decode run executes: kv-decode's, a step drafting ``draft`` tokens."""

    p: SpecParams

    def accepted(self, seq: int, step: int) -> int:
        """Draft tokens accepted: each with probability ``accept``, up to the first rejection."""
        a = 0
        for i in range(self.p.draft):
            if float(rng.uniform(self.cfg.seed, STREAM_ACCEPT, seq, step * 64 + i)) >= self.p.accept:
                break
            a += 1
        return a

    def steps_before(self, seq: int, made: int) -> int:
        k, got = 0, 1
        while got < made:
            got += self.accepted(seq, k) + 1
            k += 1
        return k

    @property
    def step_tokens(self) -> int:
        """The drafts and the bonus token."""
        return 1 + self.p.draft

    def _verified(self, cu, msg, length: int) -> tuple[int, int]:
        """A decode step keeps its accepted drafts and the bonus token, truncating the rejected
        drafts from every buffer; a prefill makes its one token."""
        st = cu.state
        if msg.arg == m.CTRL_ADMIT or length <= st["length"]:
            return 1, length
        a = self.accepted(st["seq"], st["step"])
        keep = length - (self.p.draft - a)
        if keep < length:
            for r in st["refs"]:
                cu.send(m.TRUNCATE, r.mu, arg=(keep - st["pre"]) * self.p.token_bytes, mu=r.mu, buf=r.buf,
                        alloc=r.alloc)
        return a + 1, keep

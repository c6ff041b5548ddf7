"""Composition of Experts on one node: a request's expert switched into HBM, then its tokens decoded.

Samba-CoE (Prabhakar et al., "SambaNova SN40L: Scaling the AI Memory Wall with Dataflow and
Composition of Experts", MICRO 2024, arXiv 2405.07518) keeps its experts in a node's DDR (on a
DGX: the host's memory) and copies the one a request needs into HBM. The abstract gives the
switch 15x-31x faster on the 8-socket SN40L node than on a DGX H100 / A100 and the deployment
3.7x / 6.6x faster end to end; the request mix behind the end-to-end figures is not in the
sources read (the abstract), so this module takes the simplest reading of what they state: a
request switches to its expert once and then generates ``tokens`` tokens, one at a time,

    T(tokens) = switch + tokens x decode            (its prompt's prefill left out),

and a ratio between two systems is ``T_b(tokens) / T_a(tokens)``: the switching ratio at one
token, the decode ratio as tokens grow. ``tokens_for_ratio`` inverts it: the tokens a switch
at which the model gives a published ratio (the unknown of the request mix, made explicit).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExpertServing:
    """One system serving one expert: seconds to switch it into HBM and seconds a decoded token."""

    name: str
    switch_seconds: float
    decode_seconds: float

    def end_to_end(self, tokens: float) -> float:
        """Seconds of a request that switches to its expert and decodes ``tokens`` tokens."""
        if tokens < 0:
            raise ValueError(f"a request decodes at least 0 tokens, got {tokens}")
        return self.switch_seconds + tokens * self.decode_seconds


def ratio(fast: ExpertServing, slow: ExpertServing, tokens: float) -> float:
    """How many times faster ``fast`` serves a request of ``tokens`` tokens than ``slow``."""
    return slow.end_to_end(tokens) / fast.end_to_end(tokens)


def tokens_for_ratio(fast: ExpertServing, slow: ExpertServing, target: float) -> float | None:
    """Tokens a switch at which ``ratio`` equals ``target``, solving
    ``s_slow + n d_slow = target (s_fast + n d_fast)`` for n; None where no n >= 0 gives it (the
    ratio runs from the switching ratio at n = 0 to the decode ratio as n grows, and ``target``
    is not between them)."""
    den = target * fast.decode_seconds - slow.decode_seconds
    num = slow.switch_seconds - target * fast.switch_seconds
    if den == 0:
        return None
    n = num / den
    return n if n >= 0 else None


@dataclass(frozen=True)
class Dgx:
    """An 8-GPU DGX serving an expert by tensor parallelism over its GPUs, the expert copied from
    host memory over the GPUs' host links (``links`` of them at once)."""

    name: str
    gpus: int
    hbm_bandwidth: float  # bytes/s of a GPU's HBM
    host_link: float  # bytes/s of a GPU's host link, each way
    decode_fraction: float  # of the HBM roofline a decode token reaches

    def serving(self, expert_bytes: float, links: int = 1) -> ExpertServing:
        """The DGX switching an expert of ``expert_bytes`` over ``links`` host links and decoding a
        token at ``decode_fraction`` of its GPUs' HBM roofline (every weight read once a token)."""
        if not 1 <= links <= self.gpus:
            raise ValueError(f"{self.name} has {self.gpus} host links, not {links}")
        return ExpertServing(self.name, expert_bytes / (links * self.host_link),
                             expert_bytes / (self.gpus * self.hbm_bandwidth * self.decode_fraction))


# HBM: NVIDIA's H100 SXM5 datasheet (3.35 TB/s) and A100 SXM4 80 GB datasheet (2,039 GB/s; the DGX
# A100 640 GB's GPU; the 320 GB one's A100 40 GB has 1,555 GB/s). Host links: PCIe 5.0 x16 and 4.0 x16,
# about 64 and 32 GB/s each way (PCI-SIG), one a GPU (NVIDIA's DGX H100 / DGX A100 user guides).
# Decode: "Kernel Looping" (Koeplinger et al. 2024, arXiv 2410.23668, abstract): GPUs reach 21 % of
# their peak memory bandwidth in token generation (measured on DGX H100; taken for the A100 too, chosen).
DGX = {
    "DGX H100": Dgx("DGX H100", 8, 3.35e12, 64e9, 0.21),
    "DGX A100": Dgx("DGX A100", 8, 2.039e12, 32e9, 0.21),
}

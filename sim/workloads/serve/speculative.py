"""Speculative decoding in a serve run: a draft model proposes tokens, the served model verifies them.

Each decode step of a batch (Leviathan et al., "Fast Inference from Transformers via Speculative
Decoding", ICML 2023; vLLM's ``draft_model`` method) becomes, for ``k`` drafts:

- up to ``k`` draft steps of the draft model on the same socket: its weights and KV caches live in
  the same memory tier beside the served model's, and the chip runs one model's step at a time
  (the draft's steps, then the served model's verify step: time-shared, as a GPU runs the draft
  between the target's steps). Draft step i decodes one token of every sequence drafting more than
  i, at its context plus i; the first also prefills the step's prompt chunks into the draft's cache;
- one verify step of the served model: each decoding sequence's last token and its drafts (a chunk
  of drafts + 1 tokens at its context: causal pairs, every token producing logits), beside the
  step's prompt chunks;
- the ``a`` accepted drafts and one token more (the correction, or the bonus when all are accepted)
  are made; the KV the step wrote for the ``drafts - a`` rejected ones is reclaimed: the sequence's
  pages cut to those its accepted length needs.

A sequence drafts ``min(k, tokens it has left - 1)``, so no step makes more than its output.

Acceptance: a named distribution gives, for draft position i = 1..k, the probability that the first
i drafts are all accepted, P(a >= i) (non-increasing in i). One uniform draw u per sequence and
step gives a = #{i : u < P(a >= i)}, distributed exactly so, and E[a + 1] = 1 + sum_i P(a >= i): the
closed form the tests hold the draws to. ``geometric`` is the i.i.d. model of Leviathan et al.
(2023, section 3.1 and eq. 1): each draft accepted with probability alpha, P(a >= i) = alpha**i,
E[a + 1] = (1 - alpha**(k+1)) / (1 - alpha). The others are published per-position acceptance
rates (``PUBLISHED``, each with its source).
"""

from __future__ import annotations

from dataclasses import dataclass

from mapping.models import ModelSpec
from sim import rng
from sim.serving.lengths import STREAM_ACCEPT

# Per-position acceptance rates published for a Llama-3 verifier with a small drafter: the
# rasyosef/Llama-3.2-1B-Instruct-DSpark card (vllm-project/speculators issue #1135, 2026-09-20:
# Llama-3.2-1B-Instruct verifying an 8-token DSpark drafter, vLLM's per-position rates pos_0..pos_7,
# the share of drafts whose first i+1 tokens were accepted; mean acceptance length 4.573 on HumanEval
# and 2.636 on writing, with the bonus token). No figure for Llama-3.1-8B verifying Llama-3.2-1B
# was found in the sources searched; these are the nearest published distributions.
PUBLISHED: dict[str, tuple[float, ...]] = {
    "dspark-humaneval": (0.837, 0.685, 0.562, 0.460, 0.368, 0.283, 0.217, 0.161),
    "dspark-writing": (0.617, 0.388, 0.244, 0.158, 0.099, 0.062, 0.041, 0.026),
}
ACCEPTANCE = ("geometric", *PUBLISHED)


@dataclass(frozen=True)
class Speculative:
    """A serve run's speculative decoding: the draft model, drafts a step and the acceptance distribution."""

    draft: ModelSpec
    k: int
    acceptance: str = "geometric"
    alpha: float = 0.7  # geometric only: each draft's acceptance probability

    def at_least(self, k: int) -> tuple[float, ...]:
        """P(a >= i) for i = 1..k (module docstring)."""
        if self.acceptance == "geometric":
            return tuple(self.alpha ** i for i in range(1, k + 1))
        rates = PUBLISHED[self.acceptance]
        if k > len(rates):
            raise ValueError(f"acceptance {self.acceptance!r} publishes {len(rates)} positions, not {k}")
        return rates[:k]

    def expected_tokens(self, k: int) -> float:
        """E[a + 1]: tokens a step of ``k`` drafts makes a sequence on average, 1 + sum_i P(a >= i)."""
        return 1.0 + sum(self.at_least(k))

    def accepted(self, seed: int, seq: int, step: int, k: int) -> int:
        """Drafts of sequence ``seq`` accepted at step ``step`` out of ``k`` (seeded: one uniform draw)."""
        if k <= 0:
            return 0
        u = float(rng.uniform(seed, STREAM_ACCEPT, seq, step))
        return sum(1 for p in self.at_least(k) if u < p)


def speculative_of(d: dict, models: dict[str, ModelSpec], target: ModelSpec, issues: list) -> Speculative | None:
    """The [workload.decode.speculative] table read (None: off, its draft "none" or k 0); issues for a
    draft that cannot draft for ``target`` or a distribution without k positions."""
    from sim.keys import Issue

    if d["draft"] == "none" or d["k"] == 0:
        return None
    draft = models[d["draft"]]
    if draft.vocab != target.vocab:
        issues.append(Issue("workload.decode.speculative.draft", f"{draft.name}'s vocabulary ({draft.vocab:,}) is "
                            f"not {target.name}'s ({target.vocab:,}): a draft proposes the target's tokens"))
    rates = PUBLISHED.get(d["acceptance"])
    if rates is not None and d["k"] > len(rates):
        issues.append(Issue("workload.decode.speculative.k", f"acceptance {d['acceptance']!r} publishes "
                            f"{len(rates)} positions: k at most {len(rates)}"))
    return Speculative(draft, d["k"], d["acceptance"], d["alpha"])

"""Speculative decoding in the serve workload against known answers: the acceptance draws against
their closed forms (Leviathan et al. 2023), the verify step's shape, drafted = accepted + rejected,
the pages a step leaves against the accepted lengths, and off is today's run.

The runs are test_scheduler.py's: an 8 x 16 SN40L-like chip, every step priced from one anchor
(so what is checked is what the scheduler decides, not the anchors' prices)."""

from __future__ import annotations

import pytest

from mapping.models import MODELS
from sim.serving.metrics import RequestLog
from sim.workloads.serve.figures import AnchorLog, SpecStepLog, StepLog
from sim.workloads.serve.shapes import StepShape
from sim.workloads.serve.speculative import PUBLISHED, Speculative
from tests.sim.chip.chiprun import run
from tests.sim.workloads.serve.test_scheduler import PAGE, logged, serve, trace_file

DRAFT = MODELS["llama-3.2-1b"]
KV = 131_072 + 32_768  # a token's K and V in both caches: Llama-3.1-8B's and Llama-3.2-1B's
WEIGHTS = (8_030_261_248 + 1_235_814_400) * 2  # both models in bf16


def _pages(nbytes: int) -> int:
    return -(-nbytes // PAGE)


@pytest.mark.parametrize("acceptance,alpha,k", [("geometric", 0.7, 4), ("geometric", 0.9, 8),
                                                ("dspark-humaneval", 0.0, 4), ("dspark-writing", 0.0, 8)])
def test_tokens_a_step_against_the_closed_form(acceptance, alpha, k):
    """Over 20,000 seeded draws the mean tokens a step (accepted + 1) is the closed form, and each
    position's acceptance is its published (or alpha**i) rate: Leviathan et al.'s (1 - alpha**(k+1)) /
    (1 - alpha) for the geometric model, 1 + the sum of the published per-position rates otherwise."""
    spec = Speculative(DRAFT, k, acceptance, alpha)
    n = 20_000
    draws = [spec.accepted(7, seq, step, k) for seq in range(20) for step in range(n // 20)]
    want = (1 - alpha ** (k + 1)) / (1 - alpha) if acceptance == "geometric" else 1 + sum(PUBLISHED[acceptance][:k])
    assert spec.expected_tokens(k) == pytest.approx(want, rel=1e-12)
    assert sum(a + 1 for a in draws) / n == pytest.approx(want, abs=0.04)  # ~4 standard errors
    rates = [alpha ** i for i in range(1, k + 1)] if acceptance == "geometric" else PUBLISHED[acceptance][:k]
    for i, p in enumerate(rates, start=1):
        assert sum(a >= i for a in draws) / n == pytest.approx(p, abs=0.015)
    assert all(0 <= a <= k for a in draws)


def _spec(**more) -> dict:
    return {"speculative": {"draft": "llama-3.2-1b", "k": 4, "acceptance": "geometric", "alpha": 0.7, **more}}


def test_a_lone_request_drafts_verifies_and_gives_rejected_pages_back(tmp_path):
    """One request of 40 prompt tokens and 120 output tokens, k = 4: each decode step verifies
    min(4, tokens left - 1) drafts plus one token as a chunk at its context; accepted + rejected =
    drafted; the tokens made are the prefill's and accepted + 1 a step, exactly the output; the pages
    freed after each step are those the step's lookahead took beyond its accepted length, and the
    tier's peak is the weights and the largest lookahead."""
    done = run(serve(trace_file(tmp_path, [(0, 40, 120)]), **_spec()))
    steps, specs = logged(done, StepLog), {x.step: x for x in logged(done, SpecStepLog)}
    assert done.summary["status"] == "completed" and done.summary["requests_finished"] == 1
    kv, made, held, peak, freed = 40, 1, _pages(40 * KV), 0, 0
    for s in steps[1:]:  # after the prefill, every step decodes the one sequence
        x = specs[s.step]
        d = min(4, 120 - made - 1)
        assert (x.sequences, x.drafted, x.accepted + x.rejected) == (1, d, d)
        verify = StepShape.of([], [(d + 1, kv, True)])
        assert (s.tokens, s.keys, s.kv_read, s.made) == (d + 1, verify.keys, kv, x.accepted + 1)
        assert x.reclaimed_bytes == x.rejected * KV
        held = max(held, _pages((kv + d + 1) * KV))  # the lookahead's room, taken before the step
        peak = max(peak, held)
        kv, made = kv + x.accepted + 1, made + x.accepted + 1
        keep = _pages(kv * KV)  # the pages of the accepted length
        assert x.freed_bytes == (held - keep) * PAGE if keep < held else x.freed_bytes == 0
        freed += max(0, held - keep) * PAGE
        held = keep
    assert made == 120 and freed > 0  # (a page of 2 MiB holds 12.8 tokens of both caches)
    [req] = logged(done, RequestLog)
    assert len(req.token_cycles) == 120
    s = done.summary
    assert s["spec_drafted"] == s["spec_accepted"] + s["spec_rejected"] and s["kv_bytes_freed"] == freed
    assert s["hbm_peak_bytes"] == (_pages(WEIGHTS) + peak) * PAGE


def test_draft_steps_are_priced_from_the_draft_models_anchors(tmp_path):
    """The draft model's steps are priced by anchors of its own (one for every shape here), simulated
    beside the served model's, and take time before each verify step."""
    done = run(serve(trace_file(tmp_path, [(0, 40, 12)]), **_spec()))
    anchors = logged(done, AnchorLog)
    assert len(anchors) == 4  # each model: a prefill anchor (nothing cached) and a decode one
    assert all(x.draft_cycles > 0 for x in logged(done, SpecStepLog))
    assert done.summary["spec_draft_seconds"] > 0


@pytest.mark.parametrize("off", [{"draft": "none"}, {"k": 0}])
def test_off_is_todays_run(tmp_path, off):
    """Speculative decoding off (no draft model, or k = 0) is the run without the key: the same hash."""
    trace = trace_file(tmp_path, [(0, 40, 6), (0.000001, 20, 4)])
    plain, spec = run(serve(trace)).summary, run(serve(trace, **_spec(**off))).summary
    assert spec["result_hash"] == plain["result_hash"] and "spec_drafted" not in spec


def test_a_draft_of_another_vocabulary_is_refused():
    from cluster.config.loader import ConfigError

    with pytest.raises(ConfigError, match="vocabulary"):
        run({"chip": {"preset": "sn40l"}, "workload": {"kind": "serve", "decode": _spec(draft="llama-2-7b")}})


def test_a_reservation_made_ahead_keeps_its_pages(tmp_path):
    """Under kv_reservation = "exact" the request holds its prompt and whole output from admission: the
    rejected drafts' slots are inside it, so no page is given back, and the same tokens are made."""
    trace = trace_file(tmp_path, [(0, 40, 120)])
    paged = run(serve(trace, **_spec()))
    exact = run(serve(trace, kv_reservation="exact", **_spec()))
    assert exact.summary["kv_bytes_freed"] == 0 < paged.summary["kv_bytes_freed"]
    assert exact.summary["spec_accepted"] == paged.summary["spec_accepted"]
    assert exact.summary["kv_bytes_reclaimed"] == paged.summary["kv_bytes_reclaimed"]
    assert exact.summary["hbm_peak_bytes"] == (_pages(WEIGHTS) + _pages(160 * KV)) * PAGE

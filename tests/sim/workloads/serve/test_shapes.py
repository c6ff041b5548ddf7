"""A serving step's shape and roofline, against brute force and closed forms."""

from __future__ import annotations

import pytest

from mapping.models import model_preset
from sim.workloads.serve.shapes import StepShape, anchor, roofline


def _pairs(chunks):
    """Causal pairs by brute force: each token of a chunk after k cached tokens attends to every
    earlier token of its prompt and itself."""
    total = 0
    for c, k, _ in chunks:
        total += sum(k + i + 1 for i in range(c))
    return total


def test_prefill_attention_is_quadratic_and_chunking_keeps_it():
    whole = StepShape.of([], [(1000, 0, True)])
    assert whole.keys == _pairs([(1000, 0, True)]) == 1000 * 1001 // 2
    chunks = [StepShape.of([], [(300, 0, False)]), StepShape.of([], [(300, 300, False)]),
              StepShape.of([], [(400, 600, True)])]
    assert sum(s.keys for s in chunks) == whole.keys  # chunked prefill computes the same pairs
    assert [s.kv_read for s in chunks] == [0, 300, 600]  # ... reading the earlier chunks' K and V
    assert [s.logits for s in chunks] == [0, 0, 1]  # only the last chunk makes a token


def test_mixed_step():
    s = StepShape.of([10, 20], [(5, 3, True)])
    assert (s.tokens, s.keys, s.kv_read, s.logits) == (7, 11 + 21 + _pairs([(5, 3, True)]), 33, 3)


def test_decode_roofline_is_weights_and_kv_over_bandwidth():
    """Batch-1 decode of Llama-3.1-8B: every weight once (8.03 B parameters, 2 bytes each: the
    model card), the cached K/V once, at 1.6 TB/s (sn40l's HBM), memory-bound."""
    m = model_preset("llama-3.1-8b")
    ctx = 2048
    r = roofline(m, StepShape.of([ctx], []), 1.6e12 / 1.6e9, 639e12 / 1.6e9)
    norms = (2 * 32 + 1) * 4096  # RMSNorm weights are not streamed by a kernel
    kv = ctx * m.kv_bytes_per_token
    embedding_row = 4096 * 2  # the token's embedding row, not the whole table
    expected = (m.params - 128256 * 4096 - norms) * 2 + embedding_row + kv + m.kv_bytes_per_token
    assert r.bytes == pytest.approx(expected)
    assert r.cycles == pytest.approx(expected / 1000.0, rel=1e-12)


def test_anchors_round_to_powers():
    s = StepShape(300, 300 * 1900, 300 * 1800, 300)
    assert anchor(s, 2) == StepShape(256, 256 * 2048, 256 * 2048, 0)
    assert anchor(s, 4) == StepShape(256, 256 * 1024, 256 * 1024, 0)
    assert anchor(s, 4, 16) == StepShape(256, 256 * 4096, 256 * 4096, 0)  # 1,900 and 1,800 a token: 16^3
    assert anchor(StepShape(5, 5, 0, 1), 4) == StepShape(4, 4, 0, 0)
    assert anchor(s, 1) == s

"""Composition of Experts end to end (mapping/coe.py): T(n) = switch + n x decode, closed forms.

Known answers: a 13.5 GB expert over one PCIe 5.0 x16 link (64 GB/s) switches in 13.5 / 64 =
0.2109 s; a DGX H100 decodes it at 21 % of 8 x 3.35 TB/s: 13.5e9 / 5.628e12 = 2.399 ms a token.
Two systems with switches of 10 and 100 ms and tokens of 2 and 3 ms: at n = 0 the ratio is the
switching ratio 10x, as n grows it falls to the decode ratio 1.5x; it is 4x at
(100 - 4 x 10) / (4 x 2 - 3) = 12 tokens. The published switching span (MICRO 2024, abstract:
15x to 31x, DGX H100 to DGX A100) is the DGXs' host links, PCIe 5.0 against 4.0: 2x against
the published 31 / 15 = 2.07.
"""

from __future__ import annotations

import pytest

from mapping.coe import DGX, ExpertServing, ratio, tokens_for_ratio

FAST = ExpertServing("fast", 0.010, 0.002)
SLOW = ExpertServing("slow", 0.100, 0.003)


def test_a_request_is_its_switch_and_its_tokens():
    assert FAST.end_to_end(0) == pytest.approx(0.010)
    assert FAST.end_to_end(20) == pytest.approx(0.010 + 20 * 0.002)
    with pytest.raises(ValueError, match="at least 0 tokens"):
        FAST.end_to_end(-1)


def test_the_ratio_runs_from_the_switch_to_the_decode():
    assert ratio(FAST, SLOW, 0) == pytest.approx(10.0)
    assert ratio(FAST, SLOW, 1e9) == pytest.approx(1.5, rel=1e-6)
    assert ratio(FAST, SLOW, 12) == pytest.approx(4.0)


def test_tokens_for_a_ratio_inverts_it():
    assert tokens_for_ratio(FAST, SLOW, 4.0) == pytest.approx(12.0)
    for target in (1.6, 3.0, 9.9):
        n = tokens_for_ratio(FAST, SLOW, target)
        assert n is not None and ratio(FAST, SLOW, n) == pytest.approx(target)
    assert tokens_for_ratio(FAST, SLOW, 12.0) is None  # above the switching ratio: no request gives it
    assert tokens_for_ratio(FAST, SLOW, 1.2) is None  # below the decode ratio


def test_a_dgx_switches_over_its_host_links_and_decodes_at_its_fraction():
    expert = 13.5e9
    h100 = DGX["DGX H100"].serving(expert)
    assert h100.switch_seconds == pytest.approx(13.5e9 / 64e9)
    assert h100.decode_seconds == pytest.approx(13.5e9 / (8 * 3.35e12 * 0.21))
    assert DGX["DGX H100"].serving(expert, links=8).switch_seconds == pytest.approx(h100.switch_seconds / 8)
    with pytest.raises(ValueError, match="8 host links, not 9"):
        DGX["DGX H100"].serving(expert, links=9)


def test_the_published_switching_span_is_the_dgxs_host_links():
    a100, h100 = (DGX[n].serving(13.5e9) for n in ("DGX A100", "DGX H100"))
    assert a100.switch_seconds / h100.switch_seconds == pytest.approx(31 / 15, rel=0.05)

"""Collective formulas checked against hand arithmetic."""

import pytest

from mapping import collectives as c
from mapping.graph import CollectiveKind as K
from mapping.systems import LinkKind as L

BW = 50e9


@pytest.mark.parametrize("p", [2, 8, 24])
def test_group_ratios(p):
    assert c.seconds_per_byte(K.ALL_REDUCE, L.RING, p, BW) == pytest.approx((p - 1) / (p * BW))
    assert c.seconds_per_byte(K.ALL_GATHER, L.SWITCH, p, BW) == pytest.approx((p - 1) / (p * BW))
    assert c.seconds_per_byte(K.ALL_REDUCE, L.FULLY_CONNECTED, p, BW) == pytest.approx(1 / (p * BW))
    assert c.seconds_per_byte(K.ALL_TO_ALL, L.RING, p, BW) == pytest.approx(p * p / (8 * BW))
    assert c.seconds_per_byte(K.ALL_TO_ALL, L.SWITCH, p, BW) == pytest.approx(p / (4 * BW))
    assert c.seconds_per_byte(K.ALL_TO_ALL, L.FULLY_CONNECTED, p, BW) == pytest.approx(1 / BW)


def test_single_chip_group_is_free():
    for kind in (K.ALL_REDUCE, K.ALL_TO_ALL):
        for link in L:
            assert c.seconds_per_byte(kind, link, 1, BW) == 0.0


def test_whole_system_all_to_all_on_a_torus():
    # 2^41 bytes over a 32 x 32 torus at 50 GB/s: per pair 2^41/1024^2 = 2^21 bytes,
    # 1024*1023/2 pair messages per dimension over 2*32*50 GB/s
    t = c.global_all_to_all_seconds(2**41, "r_r", [32, 32], [BW, BW], 1024)
    assert t == pytest.approx(2**21 * (1024 * 1023 / 2) / (64 * BW))


def test_all_to_all_takes_the_slowest_dimension():
    # DGX-2 like 8 x 32 switches: dimension 0 carries 8*7/2 messages at 8 x 300 GB/s,
    # dimension 1 all 256*255/2 at 32 x 12.5 GB/s; the second is slower
    per_pair = 927_711_887_360 / 256**2
    t = c.global_all_to_all_seconds(927_711_887_360, "sw_sw", [8, 32], [300e9, 12.5e9], 256)
    assert t == pytest.approx(per_pair * 256 * 255 / 2 / (32 * 12.5e9))
    assert t == pytest.approx(1.155110016, rel=1e-9)  # DFModel's logged value, in seconds


def test_hpl_panel_exchange():
    p2p, bcast = c.hpl_panel_seconds(4e9, 4e9, x=32, y=16, bandwidth0=50e9, bandwidth1=25e9)
    assert p2p == pytest.approx(4e9 / 16 / 50e9) and bcast == pytest.approx(4e9 / 32 / 25e9)
    assert c.hpl_panel_seconds(4e9, 4e9, 1, 1, BW, BW) == (0.0, 0.0)

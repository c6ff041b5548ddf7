"""Flit counts follow from a message's payload, the header and the flit width."""

import pytest

from sim.chip import messages as m
from sim.chip.messages import Sizing

PLASTICINE = Sizing(flit_bits=512, header_bits=64, max_packet_bytes=2048)


@pytest.mark.parametrize("kind,data,flits", [
    (m.REF_INC, 0, [1]),  # 64 + 38 bits: one flit
    (m.ACK, 0, [1]),
    (m.APPEND, 128, [3]),  # 64 + 38 + 1024 bits = 1126 -> 3 flits of 512
    (m.READ_RESP, 2048, [33]),  # 64 + 16384 bits -> 33 flits
    (m.READ_RESP, 5000, [33, 33, 15]),  # 2048 + 2048 + 904 bytes; each packet has its header
])
def test_flits_per_packet(kind, data, flits):
    assert PLASTICINE.packet_flits(kind, data) == flits
    assert sum(PLASTICINE.chunk_bytes(data)) == data


def test_a_reference_grows_by_the_weight_field_under_partial_free():
    narrow = Sizing(flit_bits=64, header_bits=16, weight_bits=0)
    wide = Sizing(flit_bits=64, header_bits=16, weight_bits=16)
    # 16 + 38 = 54 bits fit one 64-bit flit; with a 16-bit weight (70 bits) it takes two
    assert narrow.packet_flits(m.REFERENCE, 0) == [1]
    assert wide.packet_flits(m.REFERENCE, 0) == [2]
    assert wide.ref_bits - narrow.ref_bits == 16

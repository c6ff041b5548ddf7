"""The narrowest weight field for a fan-out, against the simulator's own split by brute force."""

import pytest

from allocators.errors import InputError
from allocators.weight_bits import copies_without_borrow, min_bits
from allocators.weights import STRATEGIES, WeightedBuffer
from sim.memory.weights import max_weight, plan_copies, weight_problem


def borrows(copies: int, bits: int, strategy: str) -> int:
    """Top-ups a holder of the full weight needs to make ``copies`` copies (the simulator's holder plan)."""
    return plan_copies(max_weight(bits, strategy), copies, strategy, bits).topups


def narrowest_by_search(copies: int, strategy: str) -> int:
    """The first field width, from 1 bit up, that the protocol accepts and never borrows with."""
    bits = 1
    while weight_problem(bits, strategy) is not None or borrows(copies, bits, strategy):
        bits += 1
    return bits


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_formula_is_the_narrowest_field_found_by_search(strategy):
    for copies in range(0, 70):
        assert min_bits(copies, strategy) == narrowest_by_search(copies, strategy), copies


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_bit_fewer_borrows_once_the_fan_out_is_past_the_narrowest_field(strategy):
    for copies in range(0, 70):
        bits = min_bits(copies, strategy)
        assert borrows(copies, bits, strategy) == 0
        if bits - 1 >= {"halve": 2, "one": 2, "log2": 1}[strategy]:
            assert borrows(copies, bits - 1, strategy) > 0, copies


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_copies_without_borrow_is_where_allocators_buffer_first_borrows(strategy):
    for bits in range(2, 7):
        wb = WeightedBuffer(bits, strategy)
        holder = wb.create()
        made = 0
        while not wb.borrows:
            wb.copy(holder)
            made += 1
        # the copy that borrowed is the first one past the limit
        assert made - 1 == copies_without_borrow(bits, strategy)


def test_known_widths():
    # halve: 8 holders need 9 bits (2^8 halves 8 times); one: 8 need 5 (16 units); log2: 8 need 4 (2^15)
    assert [min_bits(8, s) for s in ("halve", "one", "log2")] == [9, 5, 4]
    assert [min_bits(1, s) for s in ("halve", "one", "log2")] == [2, 2, 1]


def test_bad_input_is_named():
    with pytest.raises(InputError, match="split strategy 'third'"):
        min_bits(3, "third")
    with pytest.raises(InputError, match="too narrow"):
        copies_without_borrow(1, "halve")

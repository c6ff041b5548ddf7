"""Partial-free weights: the holder's plan follows allocators' rules and conserves weight."""

from hypothesis import given
from hypothesis import strategies as st

from allocators.weights import WeightedBuffer
from sim.memory.weights import from_field, max_weight, plan_copies, to_field


@given(st.sampled_from(["halve", "one", "log2"]), st.integers(2, 6), st.integers(0, 12))
def test_plan_matches_allocators_successive_copies(strategy, bits, copies):
    wb = WeightedBuffer(bits, strategy)
    holder = wb.create()
    made = [wb.copy(holder) for _ in range(copies)]
    plan = plan_copies(max_weight(bits, strategy), copies, strategy, bits)
    assert plan.keep == holder.weight
    assert list(plan.gives) == [r.weight for r in made]
    assert plan.topups == wb.borrows
    wb.check()  # allocators' conservation: owner's weight out == weights carried


@given(st.sampled_from(["halve", "one"]), st.integers(2, 10), st.integers(1, 64), st.integers(0, 20))
def test_weight_is_conserved(strategy, bits, weight, copies):
    top = max_weight(bits, strategy)
    weight = min(weight, top)
    plan = plan_copies(weight, copies, strategy, bits)
    # what the holder had plus what the MU granted is exactly what the holder and copies hold
    assert plan.keep + sum(plan.gives) == weight + plan.topups * (top - 1)
    assert plan.keep >= 1 and all(g >= 1 for g in plan.gives)


def test_log2_weights_travel_as_exponents():
    top = max_weight(3, "log2")
    assert top == 2 ** 7
    assert to_field(top, "log2") == 7 and from_field(7, "log2") == top
    assert to_field(40, "halve") == 40

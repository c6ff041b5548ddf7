"""Pareto fronts and exact hypervolume against brute force on small integer sets."""

import itertools

import numpy as np
import pytest

from cluster.explore.fidelity import promoted
from cluster.explore.pareto import (
    as_losses,
    contributions,
    front_levels,
    hypervolume,
    hypervolume_history,
    non_dominated,
    reference_point,
)


def _cells(points: np.ndarray, ref: np.ndarray) -> int:
    """Brute force: unit cells of the integer box [0, ref) dominated by some point (points on the integer grid)."""
    count = 0
    for cell in itertools.product(*(range(int(r)) for r in ref)):
        corner = np.array(cell)  # the cell [corner, corner + 1) is dominated iff some point <= corner
        count += bool(np.any(np.all(points <= corner, axis=1)))
    return count


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_hypervolume_equals_the_dominated_cells_counted_one_by_one(d):
    rng = np.random.default_rng(d)
    ref = np.full(d, 7 if d < 4 else 5)
    for _ in range(30):
        points = rng.integers(0, ref[0] + 2, size=(rng.integers(1, 9), d)).astype(float)  # some beyond ref
        assert hypervolume(points, ref) == pytest.approx(_cells(points, ref))


def test_hypervolume_of_known_shapes():
    assert hypervolume(np.array([[1.0, 1.0]]), np.array([3.0, 4.0])) == 6.0  # one box
    assert hypervolume(np.array([[0.0, 2.0], [2.0, 0.0]]), np.array([3.0, 3.0])) == 5.0  # two boxes minus overlap
    assert hypervolume(np.array([[3.0, 0.0]]), np.array([3.0, 3.0])) == 0.0  # on the reference: nothing
    assert hypervolume(np.empty((0, 3)), np.ones(3)) == 0.0


def test_non_dominated_agrees_with_pairwise_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        pts = rng.integers(0, 5, size=(12, 3)).astype(float)
        brute = [not any(np.all(q <= p) and np.any(q < p) for q in pts) for p in pts]
        assert non_dominated(pts).tolist() == brute


def test_levels_peel_fronts_and_every_point_of_a_level_is_dominated_by_the_one_before():
    rng = np.random.default_rng(1)
    pts = rng.random((40, 2))
    level = front_levels(pts)
    for k in range(1, level.max() + 1):
        for p in pts[level == k]:
            assert any(np.all(q <= p) and np.any(q < p) for q in pts[level == k - 1])


def test_maximised_objectives_are_negated_and_the_reference_adds_a_tenth_of_the_range():
    losses = as_losses(np.array([[10.0, 1.0], [20.0, 3.0]]), [True, False])
    assert losses.tolist() == [[-10.0, 1.0], [-20.0, 3.0]]
    assert reference_point(losses).tolist() == pytest.approx([-10.0 + 1.0, 3.0 + 0.2])


def test_history_is_the_hypervolume_of_each_prefix():
    rng = np.random.default_rng(2)
    pts, ref = rng.random((25, 3)), np.full(3, 1.1)
    assert hypervolume_history(pts, ref) == pytest.approx([hypervolume(pts[:k + 1], ref) for k in range(25)])


def test_a_contribution_is_the_volume_only_that_point_dominates():
    pts, ref = np.array([[0.0, 3.0], [1.0, 1.0], [3.0, 0.0]]), np.array([4.0, 4.0])
    assert contributions(pts, ref).tolist() == pytest.approx([1.0, 4.0, 1.0])  # the middle one's 2 x 2 square


def test_promotion_keeps_the_best_share_of_a_rung():
    # with eta = 2 and 4 results, two go on: a dominated newcomer does not
    rung = [np.array([0.0, 3.0]), np.array([3.0, 0.0]), np.array([2.0, 2.0])]
    assert not promoted(np.array([4.0, 4.0]), rung + [np.array([4.0, 4.0])], 2)
    # a newcomer on a front of three, the cut inside it: it goes on by the volume only it dominates
    assert promoted(np.array([0.5, 0.5]), rung + [np.array([0.5, 0.5])], 2)
    assert not promoted(np.array([0.1, 2.95]), rung + [np.array([0.1, 2.95])], 2)  # a sliver beside (0, 3)
    assert promoted(np.array([9.0, 9.0]), [np.array([9.0, 9.0])], 3)  # the first of a rung always goes on

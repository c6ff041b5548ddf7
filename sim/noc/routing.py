"""Routing functions of the NoC, looked up by name (``noc.routing``), as BookSim2's are.

A routing function maps (grid, router, destination) arrays to the output port a head flit
takes there; ``Grid.route_table`` tabulates it once per shard, so both NoC models route by
one lookup per head and a new function applies to both. Functions must be minimal (the
lookahead and dateline rules of cluster/jobs/grid.py and ``Grid.dateline_class`` assume it)
and deterministic. Register one with ``@ROUTINGS.register("name")`` in any module of
``sim/noc``.

- ``xy``: dimension order, columns first (the default; BookSim2's ``dim_order``).
- ``yx``: dimension order, rows first. Deadlock-free on a mesh for the same reason as XY
  (Dally & Seitz, 1987), and on a torus with the same dateline classes.
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from sim.noc.ports import EAST, LOCAL, NORTH, SOUTH, WEST
from sim.registry import Registry


class RoutedGrid(Protocol):
    """What a routing function reads of a grid (``sim.noc.topology.Grid`` is one): its
    shape and the minimal signed step along one dimension (a torus's shorter way round).
    Declared here so that routing need not import the topology that looks routing up."""

    @property
    def rows(self) -> int: ...

    @property
    def cols(self) -> int: ...

    def step(self, cur: np.ndarray, dst: np.ndarray, size: int) -> np.ndarray:
        """Signed direction (+1, -1, 0) to move along one dimension of length ``size``."""
        ...


RoutingFunction = Callable[[RoutedGrid, np.ndarray, np.ndarray], np.ndarray]
ROUTINGS: Registry[RoutingFunction] = Registry("routing function", packages=("sim.noc",))


def _steps(grid: RoutedGrid, cur: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signed direction along columns and along rows (minimal; a torus's shorter way round)."""
    sc = grid.step(cur % grid.cols, dst % grid.cols, grid.cols)
    sr = grid.step(cur // grid.cols, dst // grid.cols, grid.rows)
    return sc, sr


@ROUTINGS.register("xy")
def xy(grid: RoutedGrid, cur: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Columns first, then rows."""
    sc, sr = _steps(grid, cur, dst)
    return np.where(sc > 0, EAST, np.where(sc < 0, WEST, np.where(sr > 0, SOUTH, np.where(sr < 0, NORTH, LOCAL))))


@ROUTINGS.register("yx")
def yx(grid: RoutedGrid, cur: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Rows first, then columns."""
    sc, sr = _steps(grid, cur, dst)
    return np.where(sr > 0, SOUTH, np.where(sr < 0, NORTH, np.where(sc > 0, EAST, np.where(sc < 0, WEST, LOCAL))))

"""What a serve run tells whoever shows its progress: its phases as typed events, and an anchor's predicted cost.

A serve run spends nearly all of its wall time simulating anchors (costs.py), in three phases:
the planning pass (prefetch.py: the run replayed at the roofline to learn which anchors its
steps will ask for), the anchors (simulated side by side in worker processes, or one at a time
when a step needs one), and serving (the steps, each priced from its anchor, through the trace).
The simulation stays pure: it prints nothing, it calls a ``ProgressSink`` given to it from
outside (cluster/progress_serve.py draws the line) with one of the events below, and with none
given it calls nothing. No event changes what is simulated or its result.

An anchor's predicted wall seconds (``anchor_seconds``) come from its size alone, before it is
mapped: a part growing with its tiles a layer (the MILP and the placement: a compute-bound anchor
maps 32 tiles, a memory-bound one 1 to 8) plus a part per simulated iteration on every CU, growing
with the tokens a tile carries (its packets). Fitted by hand to anchors on the 8 x 16 test chip
(prefill of 256 and 64 tokens: 9.3 and 7.7 s; decode: 0.9-2.9 s) and on the whole sn40l as
docs/run.md reports them (prefill of 4,096 and 512 tokens: 80 and 30 CPU s; decode batch 64: 18),
within 2x of each; one anchor measured 6.7-10 s in three runs on this loaded shared machine.
A worker's first anchor also imports the mapper's MILP solver (scipy.optimize: about 3 s here, most
of a 16-token prefill anchor's 8 s alone in a fresh process), unless the run's process had imported
it before the workers forked: ``start_up`` in ``Planned``. benchmarks/eta_accuracy.py --serve prints
each prediction against a run's measured anchors (its last run: 0.9-1.7x); the ETA rescales them by
the anchors that finish (cluster/progress.py ``WorkEta``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sim.workloads.serve.anchors import DECODE_TILE, DECODE_TILES, LAYERS, PIPELINE, STEADY, compute_bound, tile_tokens
from sim.workloads.serve.shapes import StepShape

MAP_SECONDS = 1.0  # an anchor's mapping and placement, s, ...
TILE_MAP_SECONDS = 0.22  # ... and this more for each tile a layer
CU_ITERATION_SECONDS = 7e-4  # an iteration simulated on one CU, s ...
TILE_TOKENS = 32.0  # ... times 1 + a tile's tokens over this (a tile's packets)
START_UP_SECONDS = 3.0  # a worker's first anchor imports the MILP solver (module docstring)


def simulated_iterations(model, shape: StepShape, spec, tiles_max: int) -> tuple[bool, int, int]:
    """(compute-bound, tiles a layer, iterations simulated) the anchor's run will have, as
    anchors.simulate_anchor chooses them before its plan is mapped (the MILP may tile it finer)."""
    busy = compute_bound(model, shape, spec)
    tiles = min(tiles_max, shape.tokens) if busy else max(1, min(tiles_max, DECODE_TILES, shape.tokens // DECODE_TILE))
    if busy:
        return busy, tiles, min(tiles, PIPELINE)
    return busy, tiles, LAYERS if tiles == 1 else min(LAYERS * tiles, max(STEADY, 2 * tiles))


def anchor_seconds(model, shape: StepShape, spec, tiles_max: int = 32) -> float:
    """The predicted wall seconds of simulating the anchor ``shape`` on one core (module docstring)."""
    busy, tiles, iterations = simulated_iterations(model, shape, spec, tiles_max)
    fixed = MAP_SECONDS + TILE_MAP_SECONDS * tiles
    grain = 1.0 + tile_tokens(shape.tokens, tiles) / TILE_TOKENS
    return fixed + CU_ITERATION_SECONDS * spec.cu_count * iterations * grain


@dataclass(frozen=True)
class Planning:
    """The planning pass started: the run replayed at the roofline, its anchors noted."""


@dataclass(frozen=True)
class PlannedAnchor:
    """An anchor the planning pass foresaw and this run will simulate (not in the step cache)."""

    shape: StepShape
    seconds: float  # its predicted wall seconds (anchor_seconds)
    compute_bound: bool


@dataclass(frozen=True)
class Planned:
    """The planning pass ended: the anchors to simulate, in the order they start, ``workers`` at a time."""

    anchors: tuple[PlannedAnchor, ...]
    workers: int
    start_up: float = 0.0  # seconds a worker's first anchor spends importing what maps it (module docstring)


@dataclass(frozen=True)
class AnchorStarted:
    """An anchor the planning pass did not hand to a worker is simulated now, in the run's process."""

    anchor: PlannedAnchor


@dataclass(frozen=True)
class AnchorDone:
    """An anchor's simulation ended (in a worker or in the run's process), after ``wall_seconds``;
    ``cached``: another process had stored it (the step cache), this run simulated nothing."""

    shape: StepShape
    wall_seconds: float
    cached: bool = False


@dataclass(frozen=True)
class AnchorDropped:
    """A foreseen anchor no step needed, dropped before its worker started it (the run ended)."""

    shape: StepShape


@dataclass(frozen=True)
class Waiting:
    """A step waits for its anchor's worker (sent every second or so while it waits)."""

    shape: StepShape


@dataclass(frozen=True)
class Served:
    """A step ended: ``seconds`` of simulated time done, of the trace's ``span`` (its last arrival)."""

    seconds: float
    span: float


Event = Planning | Planned | AnchorStarted | AnchorDone | AnchorDropped | Waiting | Served


class ProgressSink(Protocol):
    """Whoever shows a serve run's progress (called in the run's process, between its steps)."""

    def __call__(self, event: Event) -> None: ...


@runtime_checkable
class Watched(Protocol):
    """A program that can tell a sink how its run goes (a serve run's: scheduler.py, system.py)."""

    def watch(self, sink: ProgressSink) -> None: ...


def start_up() -> float:
    """A worker's first anchor's imports, predicted: none once this process has imported the solver."""
    return 0.0 if "scipy.optimize" in sys.modules else START_UP_SECONDS


def planned(model, shapes: list[StepShape], spec, tiles_max: int) -> tuple[PlannedAnchor, ...]:
    """The anchors ``shapes`` with their predicted seconds and kind."""
    return tuple(PlannedAnchor(a, anchor_seconds(model, a, spec, tiles_max), compute_bound(model, a, spec))
                 for a in shapes)

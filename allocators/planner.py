"""``plan()``: place a lifetime problem with one method and report peak, bound and validity.

Methods are looked up by name in ``PLANNERS``: a planner is a function of a ``Placing`` (the
problem and what every method needs: its sweep, bound, conflict partners, budget) returning a
``Placed``; ``@planner("name")`` files it. A new method is one function and its tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from allocators.errors import InputError, NoPlacementError
from allocators.exact import solve_exact
from allocators.greedy import greedy_by_size
from allocators.layergroup import bank_conflicts, conflict_partners, layergroup
from allocators.lifetimes import Problem, with_resident_weights
from allocators.placement import slot_of
from allocators.sweep import Sweep, sweep
from allocators.validate import violations



@dataclass(frozen=True)
class Placing:
    """A placement problem as every planner receives it."""

    problem: Problem  # resident weights already expanded
    sweep: Sweep
    lower_bound: int
    partners: list[set[int]]  # conflict_partners(problem, sweep)
    capacity: int | None
    budget: float  # seconds, counted from ``t0``
    t0: float
    say: Callable[[str], None]


@dataclass(frozen=True)
class Placed:
    """What a planner found: offsets in buffer order (None: no placement) and how it searched."""

    offsets: list[int] | None
    nodes: int = 0
    seconds_to_fit: float | None = None
    proved_lower_bound: int | None = None  # a search's proof (None: only the problem's bound)
    note: str = ""


PLANNERS: dict[str, Callable[[Placing], Placed]] = {}


def planner(name: str):
    """Decorator: file a planner under ``name`` (``rdasim alloc plan --method name``)."""

    def add(fn):
        PLANNERS[name] = fn
        return fn

    return add


@dataclass(frozen=True)
class Plan:
    """A placement and its quality: peak against the lower bound, validity, proof of optimality."""

    method: str
    offsets: dict[str, int]
    peak: int
    lower_bound: int
    proved_optimal: bool
    seconds: float
    valid: bool
    capacity: int | None = None
    nodes: int = 0
    seconds_to_fit: float | None = None
    bank_conflicts: int = 0
    problems: tuple[str, ...] = field(default=())  # validator findings, empty when valid
    note: str = ""  # how the budget went when it cut the search short

    @property
    def ratio(self) -> float:
        """Peak over the lower bound (1.0 is a perfect packing)."""
        return self.peak / self.lower_bound if self.lower_bound else 1.0

    @property
    def fits(self) -> bool:
        return self.capacity is None or self.peak <= self.capacity

    def summary(self) -> dict:
        """The JSON fields of ``rdasim alloc plan --json``."""
        return {
            "method": self.method, "peak": self.peak, "lower_bound": self.lower_bound,
            "ratio": round(self.ratio, 6), "proved_optimal": self.proved_optimal,
            "seconds": round(self.seconds, 4), "valid": self.valid, "capacity": self.capacity,
            "fits": self.fits, "seconds_to_fit": None if self.seconds_to_fit is None else round(self.seconds_to_fit, 4),
            "nodes": self.nodes, "bank_conflicts": self.bank_conflicts, "buffers": len(self.offsets),
            "note": self.note,
        }


def lower_bound(problem: Problem, sw) -> int:
    """Max live bytes, and no less than any buffer's lowest legal top (bank windows)."""
    tops = [slot_of(b, problem.bank_size).lift(0) + b.size for b in problem.buffers]
    return max([sw.lower_bound] + tops)


def plan(problem: Problem, method: str = "exact", capacity: int | None = None, budget: float = 10.0,
         progress=None) -> Plan:
    """Place every buffer with ``method``; ``budget`` (seconds, from the call) bounds the exact search.

    When the budget runs out, the best plan found so far is returned, marked not proven (``note``
    says what was skipped). ``progress``, if given, receives one-line messages as each phase ends.
    """
    if method not in PLANNERS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(PLANNERS)}")
    if capacity is not None and capacity <= 0:
        raise InputError(f"capacity must be positive, got {capacity}")
    _check_64_bits(problem)
    t0 = time.perf_counter()
    say = progress or (lambda message: None)
    prob = with_resident_weights(problem)
    if not prob.buffers:
        return Plan(method, {}, 0, 0, True, 0.0, True, capacity)
    sw = sweep(prob)
    lb = lower_bound(prob, sw)
    say(f"{len(prob.buffers):,} buffers, {sw.sections:,} time sections, lower bound {lb:,} B "
        f"({time.perf_counter() - t0:.1f} s)")
    partners = conflict_partners(prob, sw)
    found = PLANNERS[method](Placing(prob, sw, lb, partners, capacity, budget, t0, say))
    nodes, fit_at, note = found.nodes, found.seconds_to_fit, found.note
    proved = lb if found.proved_lower_bound is None else found.proved_lower_bound
    if found.offsets is None:
        raise NoPlacementError("no placement found within the budget (the bank constraints leave no room)")
    offsets = [int(o) for o in found.offsets]
    placed = {b.id: o for b, o in zip(prob.buffers, offsets)}
    peak = max(o + b.size for b, o in zip(prob.buffers, offsets))
    wrong = violations(prob, placed)
    seconds = time.perf_counter() - t0
    if fit_at is None and (capacity is None or peak <= capacity):
        fit_at = seconds
    return Plan(
        method=method, offsets=placed, peak=peak, lower_bound=lb,
        proved_optimal=peak <= proved,  # the problem's bound, or a search's proof
        seconds=seconds, valid=not wrong, capacity=capacity, nodes=nodes, seconds_to_fit=fit_at,
        bank_conflicts=bank_conflicts(prob, offsets, partners),
        problems=tuple(f"{v.kind}: {', '.join(v.buffers)}: {v.detail}" for v in wrong), note=note)


LIMIT = 1 << 62  # offsets, sizes and times are int64 in numpy; peaks may add sizes up


def _check_64_bits(problem: Problem) -> None:
    """Refuse numbers the planners' 64-bit arrays cannot hold (instead of an OverflowError)."""
    for b in problem.buffers:
        for name in ("start", "end", "size", "alignment"):
            v = getattr(b, name)
            if abs(v) >= LIMIT:
                raise InputError(f"buffer {b.id!r}: {name} {v} is beyond what 64-bit addresses and times hold "
                                 f"(at most {LIMIT - 1:,})")


def _peak_of(prob, offsets) -> int:
    return max(o + b.size for b, o in zip(prob.buffers, offsets))


@planner("greedy")
def _greedy(x: Placing) -> Placed:
    """TFLite's arena planner: largest first, lowest fitting offset (allocators/greedy.py)."""
    return Placed(greedy_by_size(x.problem, x.sweep, x.say))


@planner("layergroup")
def _layergroup(x: Placing) -> Placed:
    """TPU-MLIR's layer-group allocator, bank-conflict aware (allocators/layergroup.py)."""
    return Placed(layergroup(x.problem, x.sweep, x.capacity, x.partners))


@planner("exact")
def _exact(x: Placing) -> Placed:
    """Exact search seeded with the better of the two heuristics, all within the budget.

    The greedy seed always runs (it is fast, and a plan is better than none); layergroup and
    the search run only while budget is left, so a budget spent early returns the best seed."""
    prob, sw, capacity, budget, t0, lb, partners, say = (x.problem, x.sweep, x.capacity, x.budget, x.t0,
                                                         x.lower_bound, x.partners, x.say)
    deadline = t0 + budget
    seeds: list[list[int]] = []
    skipped: list[str] = []
    for name, heuristic in (("greedy", lambda: greedy_by_size(prob, sw, say)),
                            ("layergroup", lambda: layergroup(prob, sw, capacity, partners))):
        if seeds and time.perf_counter() >= deadline:
            skipped.append(name)
            continue
        try:
            seeds.append(heuristic())
            say(f"{name}: peak {_peak_of(prob, seeds[-1]):,} B ({time.perf_counter() - t0:.1f} s)")
        except NoPlacementError:
            pass
    incumbent = min(seeds, key=lambda offs: _peak_of(prob, offs), default=None)
    if incumbent is not None and time.perf_counter() >= deadline:
        skipped.append("the exact search")
        note = (f"the {budget:g} s budget was spent before {' and '.join(skipped)}: best heuristic plan, "
                "not proven optimal")
        say(note)
        return Placed(incumbent, 0, None, lb, note)
    result = solve_exact(prob, sw, capacity, deadline, t0, incumbent, lb, say)
    note = "" if result.peak is None or result.peak <= result.proved_lower_bound else (
        f"the {budget:g} s budget ran out: best plan found, optimum not proven (proved peak >= "
        f"{result.proved_lower_bound:,} B)")
    return Placed(result.offsets, result.nodes, result.seconds_to_fit, result.proved_lower_bound, note)


METHODS = tuple(PLANNERS)  # the built-in methods, in the order they are defined above

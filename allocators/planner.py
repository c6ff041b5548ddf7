"""``plan()``: place a lifetime problem with one method and report peak, bound and validity."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from allocators.errors import InputError, NoPlacementError
from allocators.exact import solve_exact
from allocators.greedy import greedy_by_size
from allocators.layergroup import bank_conflicts, conflict_partners, layergroup
from allocators.lifetimes import Problem, with_resident_weights
from allocators.placement import slot_of
from allocators.sweep import sweep
from allocators.validate import violations

METHODS = ("exact", "layergroup", "greedy")


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
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
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
    nodes, fit_at, proved, note = 0, None, lb, ""
    if method == "greedy":
        offsets = greedy_by_size(prob, sw, progress)
    elif method == "layergroup":
        offsets = layergroup(prob, sw, capacity, partners)
    else:
        offsets, nodes, fit_at, proved, note = _exact(prob, sw, capacity, budget, t0, lb, partners, say)
    if offsets is None:
        raise NoPlacementError("no placement found within the budget (the bank constraints leave no room)")
    placed = {b.id: int(o) for b, o in zip(prob.buffers, offsets)}
    peak = max(o + b.size for b, o in zip(prob.buffers, offsets))
    found = violations(prob, placed)
    seconds = time.perf_counter() - t0
    if fit_at is None and (capacity is None or peak <= capacity):
        fit_at = seconds
    return Plan(
        method=method, offsets=placed, peak=peak, lower_bound=lb,
        proved_optimal=peak <= lb or (method == "exact" and peak <= proved),
        seconds=seconds, valid=not found, capacity=capacity, nodes=nodes, seconds_to_fit=fit_at,
        bank_conflicts=bank_conflicts(prob, offsets, partners),
        problems=tuple(f"{v.kind}: {', '.join(v.buffers)}: {v.detail}" for v in found), note=note)


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


def _exact(prob, sw, capacity, budget, t0, lb, partners, say):
    """Exact search seeded with the better of the two heuristics, all within the budget.

    The greedy seed always runs (it is fast, and a plan is better than none); layergroup and
    the search run only while budget is left, so a budget spent early returns the best seed."""
    deadline = t0 + budget
    seeds, skipped = [], []
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
        return incumbent, 0, None, lb, note
    result = solve_exact(prob, sw, capacity, deadline, t0, incumbent, lb, say)
    note = "" if result.peak is None or result.peak <= result.proved_lower_bound else (
        f"the {budget:g} s budget ran out: best plan found, optimum not proven (proved peak >= "
        f"{result.proved_lower_bound:,} B)")
    return result.offsets, result.nodes, result.seconds_to_fit, result.proved_lower_bound, note

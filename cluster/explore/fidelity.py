"""Multi-fidelity: successive halving over runs cut at increasing run.max_cycles, decided as each run ends.

A trial first runs cut at the cheapest rung's cycles. When its result arrives it is
compared with every feasible result of that rung so far (its own included): it goes on to
the next rung (the last is the full run) if it is among the best max(1, n // eta) of them,
otherwise the optimiser is told it was pruned. "Best" is by non-dominated level first
(as NSGA-II and MO-ASHA rank), then, within the level the cut falls in, by exclusive
hypervolume contribution (SMS-EMOA's measure, the quantity the exploration is judged by),
on the cut runs' objectives against the rung's worst value plus 10 %. This is asynchronous
successive halving (ASHA, Li et al., MLSys 2020) with a multi-objective ranking in the
manner of MO-ASHA (Schmucker et al., 2021): no rung waits for a batch, so trials stay in
flight on Ray. (Optuna's SuccessiveHalvingPruner ranks one objective; Optuna pruners do
not support multi-objective studies.) A cut run that completes before its cap already is
the full result: the trial is final at once, with fidelity "full".
"""

from __future__ import annotations

import numpy as np

from cluster.explore.pareto import contributions, front_levels, reference_point


def promoted(candidate: np.ndarray, rung_results: list[np.ndarray], eta: int) -> bool:
    """Whether the loss vector ``candidate`` (the last of ``rung_results``, every feasible result of
    its rung so far) is among the best max(1, n // eta) of them (ties go to the earlier results)."""
    losses = np.vstack(rung_results)
    keep = max(1, len(losses) // eta)
    level = front_levels(losses)
    me = len(losses) - 1
    better = int(np.sum(level < level[me]))
    same = np.flatnonzero(level == level[me])
    if better + len(same) <= keep or better >= keep:
        return better < keep
    gain = contributions(losses[same], reference_point(losses))
    ahead = int(np.sum(gain > gain[-1]) + np.sum(gain[:-1] == gain[-1]))  # the candidate is the last of ``same``
    return better + ahead < keep


def rung_cycles(cycles: tuple[int, ...], rung: int) -> int | None:
    """run.max_cycles of a rung; None for the last (full) rung, which keeps the base config's."""
    return cycles[rung] if rung < len(cycles) else None

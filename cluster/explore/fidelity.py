"""Multi-fidelity: successive halving over runs cut at increasing run.max_cycles, decided as each run ends.

A trial first runs cut at the cheapest rung's cycles. When its result arrives it is
compared with every feasible result of that rung so far (its own included): it goes on to
the next rung (the last is the full run) if it is among the best max(1, n // eta) of them,
otherwise the optimiser is told it was pruned. "Best" is the order NSGA-II selects by:
non-dominated level first, then crowding distance, on the cut runs' objectives. This is
asynchronous successive halving (ASHA, Li et al., MLSys 2020) with the multi-objective
ranking of MO-ASHA (Schmucker et al., 2021): no rung waits for a batch, so trials stay in
flight on Ray. (Optuna's SuccessiveHalvingPruner ranks one objective; Optuna pruners do
not support multi-objective studies.) A cut run that completes before its cap already is
the full result: the trial is final at once, with fidelity "full".
"""

from __future__ import annotations

import numpy as np

from cluster.explore.pareto import nsga_order


def promoted(candidate: np.ndarray, rung_results: list[np.ndarray], eta: int) -> bool:
    """Whether the loss vector ``candidate`` (already among ``rung_results``, every feasible result of
    its rung so far) is among the best max(1, n // eta) of them."""
    losses = np.vstack(rung_results)
    keep = max(1, len(losses) // eta)
    order = nsga_order(losses)
    # the candidate's row: the last equal to it (it was appended last), so ties go to earlier results
    index = int(np.flatnonzero(np.all(losses == candidate, axis=1))[-1])
    return index in set(order[:keep].tolist())


def rung_cycles(cycles: tuple[int, ...], rung: int) -> int | None:
    """run.max_cycles of a rung; None for the last (full) rung, which keeps the base config's."""
    return cycles[rung] if rung < len(cycles) else None

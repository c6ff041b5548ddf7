"""The optimisers an explore can name: each an Optuna sampler, built for the space, seed and budget.

The default is multi-objective TPE (Ozaki et al., GECCO 2020 / JAIR 2022): it models the
good and the bad trials' parameter densities, so it handles integer, ordinal, categorical
and conditional parameters natively (``group`` splits the space by which parameters a
trial had), learns infeasible regions from the trials told infeasible (Optuna's
constraints), and is sample-efficient from a few tens of trials, the budgets an
exploration of minute-long runs can afford. NSGA-II needs several generations of a
population to improve on random search; GP needs PyTorch and is slower per trial.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import optuna

from cluster.errors import UserError
from cluster.explore.space import Space


@dataclass(frozen=True)
class Optimizer:
    name: str
    doc: str
    build: Callable[[Space, int, int], optuna.samplers.BaseSampler]  # (space, seed, budget) -> sampler
    finite_only: bool = False  # needs a space it can enumerate (no real range)


class ExhaustiveSampler(optuna.samplers.BruteForceSampler):
    """Optuna's brute-force sampler without its stop: every point of a finite space once, in a seeded
    order. It reads the trials' params (a rerun's rebuilt trials count as visited, which GridSampler's
    grid ids would not) and enumerates the tree of active parameters (conditions). Its after_trial
    only calls study.stop() once the space is covered, which ask/tell cannot: the budget, clipped
    to the space's size, ends the exploration instead."""

    def after_trial(self, study, trial, state, values) -> None:  # noqa: ARG002 - the stop is all it does
        return None


def _grid(space: Space, seed: int, budget: int) -> optuna.samplers.BaseSampler:
    return ExhaustiveSampler(seed=seed)


def _startup(budget: int) -> int:
    """Random trials before the model: a fifth of the budget, between 4 and 10 (Optuna's default)."""
    return max(4, min(10, budget // 5))


def _tpe(space: Space, seed: int, budget: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=space.conditional,
                                      n_startup_trials=_startup(budget))


def _gp(space: Space, seed: int, budget: int) -> optuna.samplers.BaseSampler:
    try:
        import torch  # noqa: F401 - Optuna's GPSampler fits its Gaussian process with PyTorch
    except ImportError:
        raise UserError("optimizer gp needs PyTorch (pip install torch); or use tpe, nsga2, random or grid") from None
    return optuna.samplers.GPSampler(seed=seed, n_startup_trials=_startup(budget))


def _nsga2(space: Space, seed: int, budget: int) -> optuna.samplers.BaseSampler:
    """A population of a fifth of the budget (4 to 50), so a small budget still sees several generations."""
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(50, budget // 5)))


OPTIMIZERS: dict[str, Optimizer] = {
    "tpe": Optimizer("tpe", "multi-objective TPE (the default)", _tpe),
    "nsga2": Optimizer("nsga2", "NSGA-II, a genetic algorithm", _nsga2),
    "gp": Optimizer("gp", "Gaussian-process Bayesian optimisation (needs PyTorch)", _gp),
    "random": Optimizer("random", "independent uniform draws", lambda space, seed, budget:
                        optuna.samplers.RandomSampler(seed=seed)),
    "grid": Optimizer("grid", "every point of a finite space once, in a seeded order", _grid, finite_only=True),
}


def sampler(name: str, space: Space, seed: int, budget: int) -> optuna.samplers.BaseSampler:
    with warnings.catch_warnings():  # TPE's group and the brute-force sampler are marked experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return OPTIMIZERS[name].build(space, seed, budget)

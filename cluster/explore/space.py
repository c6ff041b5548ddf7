"""The search space: config keys with a type, a range or values, and the conditions that make them active.

    int          low..high (log: sampled on a log scale; step)       -> optuna IntDistribution
    real         low..high (log)                                     -> optuna FloatDistribution
    ordinal      ordered values, sampled as their index 0..n-1       -> optuna IntDistribution over the index
    categorical  unordered values                                    -> optuna CategoricalDistribution

An ordinal is an index so that model-based samplers (TPE, GP) see its order; its value is the
config value. A parameter with ``when = {key = value | [values]}`` is suggested only when every
named parameter is active and takes one of the values (e.g. memory.weight_bits only when
memory.reclaim is partial-free); an inactive parameter keeps the base config's value.
Parameters are suggested parents first, so a condition always reads a decided value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

TYPES = ("int", "real", "ordinal", "categorical")
GRID_LIMIT = 1_000_000  # a finite space larger than this is not enumerated


@dataclass(frozen=True)
class Param:
    """One dimension of the space: a dotted config key and how its values are drawn."""

    key: str
    type: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: int | None = None
    values: tuple = ()
    when: dict[str, tuple] = field(default_factory=dict)  # parent key -> values that make this one active

    def distribution(self) -> BaseDistribution:
        if self.type == "int":
            assert self.low is not None and self.high is not None
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=self.step or 1)
        if self.type == "real":
            assert self.low is not None and self.high is not None
            return FloatDistribution(float(self.low), float(self.high), log=self.log)
        if self.type == "ordinal":
            return IntDistribution(0, len(self.values) - 1)
        return CategoricalDistribution(list(self.values))

    def suggest(self, trial: optuna.trial.Trial):
        """Ask a live trial for this parameter's value (the optimiser's: an ordinal's index)."""
        if self.type == "int":
            assert self.low is not None and self.high is not None
            return trial.suggest_int(self.key, int(self.low), int(self.high), step=self.step or 1, log=self.log)
        if self.type == "real":
            assert self.low is not None and self.high is not None
            return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log)
        if self.type == "ordinal":
            return trial.suggest_int(self.key, 0, len(self.values) - 1)
        return trial.suggest_categorical(self.key, list(self.values))

    def decode(self, internal):
        """The optimiser's value -> the config value (an ordinal's index -> its value)."""
        return self.values[int(internal)] if self.type == "ordinal" else internal

    def encode(self, value):
        """A config value as the optimiser holds it (inverse of decode)."""
        return self.values.index(value) if self.type == "ordinal" else value

    def finite_values(self) -> list | None:
        """Every value this parameter can take, or None for a real range."""
        if self.type in ("ordinal", "categorical"):
            return list(self.values)
        if self.type == "int":
            assert self.low is not None and self.high is not None
            return list(range(int(self.low), int(self.high) + 1, self.step or 1))
        return None


@dataclass(frozen=True)
class Space:
    params: tuple[Param, ...]  # parents before the parameters whose condition names them

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    @property
    def conditional(self) -> bool:
        return any(p.when for p in self.params)

    def active(self, param: Param, chosen: dict) -> bool:
        return all(parent in chosen and chosen[parent] in values for parent, values in param.when.items())

    def suggest(self, draw: Callable[[Param], object]) -> dict[str, object]:
        """The config values of one trial: ``draw(param)`` gives the optimiser's value of each active param."""
        chosen: dict[str, object] = {}
        for p in self.params:
            if self.active(p, chosen):
                chosen[p.key] = p.decode(draw(p))
        return chosen

    def encode(self, values: dict[str, object]) -> tuple[dict[str, object], dict[str, BaseDistribution]]:
        """A stored trial's config values -> the optimiser's params and their distributions (rebuilding a study)."""
        params, dists = {}, {}
        for p in self.params:
            if p.key in values:
                params[p.key] = p.encode(values[p.key])
                dists[p.key] = p.distribution()
        return params, dists

    def size(self) -> float:
        """Number of distinct points (conditions respected); inf with a real range."""
        total = 0
        for _ in itertools.islice(self.points(), GRID_LIMIT + 1):
            total += 1
        return math.inf if total > GRID_LIMIT else total

    def points(self) -> Iterator[dict[str, object]]:
        """Every point of a finite space (conditions respected), in a fixed order; empty with a real range."""
        if any(p.finite_values() is None for p in self.params):
            return iter(())
        return self._points(0, {})

    def _points(self, i: int, chosen: dict) -> Iterator[dict[str, object]]:
        if i == len(self.params):
            yield dict(chosen)
            return
        p = self.params[i]
        if not self.active(p, chosen):
            yield from self._points(i + 1, chosen)
            return
        for v in p.finite_values() or []:
            chosen[p.key] = v
            yield from self._points(i + 1, chosen)
            del chosen[p.key]


def order_params(params: list[Param]) -> list[Param] | None:
    """Parents before children (a stable topological order); None if the conditions form a cycle."""
    placed: list[Param] = []
    names: set[str] = set()
    rest = list(params)
    while rest:
        ready = [p for p in rest if all(parent in names for parent in p.when)]
        if not ready:
            return None
        for p in ready:
            placed.append(p)
            names.add(p.key)
        rest = [p for p in rest if p.key not in names]
    return placed

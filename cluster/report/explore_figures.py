"""Figures of an exploration (``rdasim explore --out DIR``): the objectives with the front, the hypervolume
against trials (one curve per optimiser), and how much each parameter matters to each objective.

An exploration is found by its trials' manifest (DIR/_trials.manifest.json holding an [explore]
spec); the spec is read back from the manifest (with its base config as stored), so the figures
use the objectives, directions and reference of the exploration itself. Parameter importance is
Optuna's PED-ANOVA (Watanabe et al., IJCAI 2023: how much each parameter's distribution among the
best trials differs from its distribution among all, on a study rebuilt from the stored trials);
it needs no scikit-learn and no random seed, so the figure is the same on every run.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cluster.report import labels, units
from cluster.report.data import Skip
from cluster.report.style import wrap

if TYPE_CHECKING:  # the explore package imports Optuna: only when an exploration is drawn
    from cluster.explore.spec import ExploreSpec
    from cluster.explore.trials import StoredRun

MANIFEST = "_trials.manifest.json"


@dataclass(frozen=True)
class Exploration:
    spec: ExploreSpec
    runs: list[StoredRun]  # by trial, then rung
    base: dict | None = None  # the base config's own run (the default reference comes from it)
    table: object = None  # the stored trials (a pyarrow Table): how each trial ended

    def front(self):
        from cluster.explore.front import find_front

        return find_front(self.spec.objectives, self.runs, self.spec.reference, self.base)


def find_exploration(path: Path) -> Exploration | None:
    """The exploration stored in ``path`` (an explore --out DIR), or None if there is none."""
    manifest = Path(path) / MANIFEST
    if not manifest.is_file():
        return None
    from cluster.errors import UserError
    from cluster.explore.spec import parse_explore
    from cluster.explore.trials import read_runs
    from cluster.sweep.manifest import Manifest

    m = Manifest.load(manifest)
    if "explore" not in m.spec:
        return None
    raw = {**m.spec, "base": m.specs[-1]["base"] if m.specs else m.spec.get("base", {})}
    try:
        spec = parse_explore(raw, Path(path), m.spec_path)
    except UserError:  # a spec this code no longer reads: the trials still get the sweep figures
        return None
    from cluster.explore.reference import base_point, read_base

    runs, table = read_runs(Path(path) / m.sweep, [o.metric for o in spec.objectives])
    return Exploration(spec, runs, read_base(Path(path), base_point(spec)), table) if runs else None


def _losses(ex: Exploration, runs: list) -> np.ndarray:
    from cluster.explore.pareto import as_losses

    return as_losses(np.array([r.values for r in runs], dtype=float), [o.maximize for o in ex.spec.objectives])


def objectives_scatter(ex: Exploration, plt):
    """Every feasible full run in each pair of objectives, the front (non-dominated in all objectives) marked."""
    from matplotlib.ticker import MaxNLocator

    from cluster.explore.front import feasible_final
    from cluster.explore.tally import line, tally

    objectives = ex.spec.objectives
    if len(objectives) < 2:
        raise Skip("one objective: no front to draw")
    good = feasible_final(ex.runs)
    if not good:
        raise Skip("no feasible trial")
    pareto = ex.front().pareto
    values = np.array([r.values for r in good], dtype=float)
    best = np.array([r.values for r in pareto], dtype=float)
    pairs = list(itertools.combinations(range(len(objectives)), 2))
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.5 * len(pairs), 4.2), constrained_layout=True, squeeze=False)
    for ax, (i, j) in zip(axes[0], pairs):
        ax.scatter(values[:, i], values[:, j], s=14, color="0.6", label="feasible trial")
        ax.plot(best[:, i], best[:, j], "o", color="C3", label="Pareto front (in all objectives)")
        for which, k in (("x", i), ("y", j)):
            unit = labels.metric_parts(objectives[k].metric)[1]
            shown = units.apply(ax, which, unit, float(np.max(np.abs(values[:, k]))))
            room = (4.5 if which == "x" else 3.6) * 72 * 0.85  # a label no longer than its axis: wrapped
            (ax.set_xlabel if which == "x" else ax.set_ylabel)(wrap([_objective_label(objectives[k], shown)], room,
                                                                    10.0))
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # a few engineering ticks: they never run together
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize="small")
    title = [line(tally(ex.spec, ex.table)), f"{len(pareto)} on the front (red); grey: the other feasible full runs"]
    fig.suptitle(wrap(title, fig.get_figwidth() * 72 * 0.95, 10.0), fontsize="medium")
    return fig


def _objective_label(objective, unit: str | None = None) -> str:
    arrow = "higher is better" if objective.maximize else "lower is better"
    return f"{labels.metric(objective.metric, unit)}, {arrow}"


def hypervolume_vs_trials(ex: Exploration, plt):
    """The normalised hypervolume of the feasible full runs among each optimiser's first k trials, against the
    reference and ideal point of the whole exploration (the reference and its rule stated in the title)."""
    from matplotlib.ticker import MaxNLocator

    from cluster.explore.front import normalized
    from cluster.explore.pareto import as_losses, hypervolume_history
    from cluster.explore.reference import Reference
    from cluster.explore.trials import FULL

    front = ex.front()
    if front.reference is None:
        raise Skip("no feasible trial and no base run: no hypervolume")
    maximize = [o.maximize for o in ex.spec.objectives]
    ref = as_losses(np.array([[front.reference[o.metric] for o in ex.spec.objectives]]), maximize)[0]
    trials: dict[str, dict[int, np.ndarray]] = {}  # optimiser -> trial -> its full result's losses (NaN if none)
    for r in ex.runs:
        mine = trials.setdefault(r.optimizer, {})
        mine.setdefault(r.trial, np.full(len(maximize), np.nan))
        if r.fidelity == FULL and r.feasible:
            mine[r.trial] = as_losses(np.array([r.values]), maximize)[0]
    every = np.array([v for results in trials.values() for v in results.values() if np.all(np.isfinite(v))])
    fig, ax = plt.subplots(figsize=(6.4, 4.2), constrained_layout=True)
    for name, results in sorted(trials.items()):
        curve = hypervolume_history(np.array([results[t] for t in sorted(results)]), ref)
        share = [normalized(every, ref, v) for v in curve]  # one box for every curve: the whole exploration's
        ax.plot(np.arange(1, len(curve) + 1), share, drawstyle="steps-post", label=name)
    ax.set_xlabel("trials of the optimiser")
    ax.set_ylabel("normalised hypervolume of the feasible front")
    ax.set_ylim(0, 1.05)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    parts = Reference(front.reference, front.reference_from or {}).parts(ex.spec.objectives)
    ax.set_title(wrap([f"hypervolume {front.hypervolume:.4g} (normalised {front.normalized:.3f}) against the reference"]
                      + [f"{labels.metric_parts(m)[0]}: {shown} ({rule})" for m, shown, rule in parts],
                      6.4 * 72 * 0.9, 8.3), fontsize="small")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", title="optimizer")
    return fig


def parameter_importance(ex: Exploration, plt):
    """PED-ANOVA importance of each parameter for each objective (Optuna), on the study the trials rebuild."""
    import optuna
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    from cluster.explore.driver import INFEASIBLE, directions, optuna_quiet, rebuild

    objectives = ex.spec.objectives
    with optuna_quiet():
        study = optuna.create_study(directions=directions(ex.spec))
    rebuild(study, ex.spec, ex.runs)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
                and t.constraints.get(INFEASIBLE, 0.0) <= 0]
    if len(complete) < 4:
        raise Skip(f"{len(complete)} feasible full trials: too few to rank parameters")
    keys = ex.spec.space.keys
    scores = np.zeros((len(objectives), len(keys)))
    for i, o in enumerate(objectives):
        sign = -1.0 if o.maximize else 1.0  # PED-ANOVA ranks parameters by how they lead to low target values
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its reminder that it looks for low values, and experimental notes
            found = get_param_importances(study, evaluator=PedAnovaImportanceEvaluator(),
                                          target=partial(_signed, i, sign))
        scores[i] = [found.get(k, 0.0) for k in keys]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(keys), 3.6), constrained_layout=True)
    width = 0.8 / len(objectives)
    for i, o in enumerate(objectives):
        ax.bar(np.arange(len(keys)) + (i - (len(objectives) - 1) / 2) * width, scores[i], width,
               label=labels.metric_parts(o.metric)[0])  # which objective: its values' unit is not shown
    ax.set_xticks(np.arange(len(keys)))
    ax.set_xticklabels(keys, rotation=20, ha="right", fontsize="small")
    ax.set_ylabel("importance (sums to 1)")  # a label no longer than its axis
    ax.set_title("how much each parameter matters to each objective (PED-ANOVA)", fontsize="small")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def _signed(i: int, sign: float, trial) -> float:
    return sign * trial.values[i]


FIGURES: dict[str, Callable] = {
    "objectives": objectives_scatter,
    "hypervolume-vs-trials": hypervolume_vs_trials,
    "parameter-importance": parameter_importance,
}


def figures(path: str | Path) -> list[tuple[str, Callable]]:
    """(name, make) of every exploration figure for the results at ``path`` (``make(plt)`` draws it); none if it
    holds no exploration."""
    ex = find_exploration(Path(path))
    if ex is None:
        return []
    return [(f"explore-{name}", partial(make, ex)) for name, make in FIGURES.items()]

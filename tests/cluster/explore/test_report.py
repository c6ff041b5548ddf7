"""rdasim report on an exploration: the front, the hypervolume per optimiser, parameter importance."""

import numpy as np
import pytest

from cluster.cli import main
from cluster.explore.driver import Options, run_explore
from cluster.explore.spec import read_explore
from tests.cluster.explore.test_explore import _kv


def test_report_draws_an_exploration_continued_by_a_second_optimiser(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cluster.report.explore_figures import find_exploration, hypervolume_vs_trials, objectives_scatter

    spec, out = read_explore(_kv(tmp_path, 6)), tmp_path / "out"
    run_explore(spec, out, Options(optimizer="random", in_process=True, quiet=True))
    last = run_explore(spec, out, Options(budget=10, in_process=True, quiet=True))  # tpe continues the study
    assert main(["report", str(out), "--quiet"]) == 0
    written = {p.split("/")[-1] for p in capsys.readouterr().out.split()}
    assert {"explore-objectives.png", "explore-hypervolume-vs-trials.png",
            "explore-parameter-importance.png"} <= written

    ex = find_exploration(out)
    fig = hypervolume_vs_trials(ex, plt)
    lines = {line.get_label(): line.get_ydata() for line in fig.axes[0].lines}
    assert sorted(lines) == ["random", "tpe"] and len(lines["random"]) == 6 and len(lines["tpe"]) == 4
    for y in lines.values():  # a running hypervolume never falls, and no subset beats all the trials
        assert np.all(np.diff(y) >= 0) and y[-1] <= last.front.normalized * (1 + 1e-12) <= 1.0
    title = fig.axes[0].get_title()  # the reference of each objective, by the name the figures give it, and its rule
    from cluster.report.labels import metric_parts

    for o in spec.objectives:
        assert f"{metric_parts(o.metric)[0]}: " in title and o.metric not in title
    assert f"normalised {last.front.normalized:.3f}" in title
    fig = objectives_scatter(ex, plt)
    assert len(fig.axes) == 3  # three objectives: three pairs
    assert f"{len(last.front.pareto)} on the front" in fig._suptitle.get_text()
    plt.close("all")

"""rdasim report over a tree of sweeps of every kind: never a traceback, every kind
drawn by default, one colour per value across a report, independent y where scales differ, engineering
prefixes, readable wide heatmaps, figures that say which point, all-zero metrics left out unless asked."""


import pyarrow as pa
import pytest

from cluster.cli import main
from cluster.report import units
from cluster.report.data import Skip
from cluster.report.sources import SweepTables
from cluster.report.style import Palette
from cluster.sweep.commands import COMMANDS
from tests.paths import EXAMPLES

SPECS = {
    "n": ("noc", "[base]\nnoc.k = 4\nnoc.warmup_cycles = 100\nnoc.measure_cycles = 200\n"
                 "[axes]\nnoc.rate = [0.1, 0.2]\n"),
    "race": ("run", f'base = "{EXAMPLES / "race.toml"}"\n',
             '[axes]\nmemory.reclaim = ["refcount", "partial-free"]\n'),
    "sys": ("system", f'base = "{EXAMPLES / "system_moe_alltoall.toml"}"\n',
            '[axes]\nworkload.experts.skew = [0.0, 1.5]\n[[zip]]\nsystem.chips = [4, 8]\n'
            '"system.network[0].size" = [4, 8]\n'),
    "nop": ("noop", "[axes]\nnoop.value = [1.0, 2.0]\n"),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    pytest.importorskip("matplotlib")
    tmp = tmp_path_factory.mktemp("kinds")
    for name, (command, *parts) in SPECS.items():
        base = parts[0] if len(parts) == 2 else ""
        body = parts[-1]
        spec = tmp / f"{name}.toml"
        spec.write_text(f'{base}[sweep]\nname = "{name}"\ncommand = "{command}"\n{body}')
        assert main(["sweep", str(spec), "--out", str(tmp / "out"), "--in-process", "--quiet"]) == 0
    return tmp / "out"


def test_every_sweep_kind_has_default_figures(tree, capsys):
    assert {c for c, *_ in SPECS.values()} == set(COMMANDS)  # every kind a sweep can run is here
    assert main(["report", str(tree), "--out", str(tree / "all"), "--quiet"]) == 0
    written = {p.rsplit("/", 1)[-1] for p in capsys.readouterr().out.split() if p.endswith(".png")}
    for name in SPECS:
        assert any(w.startswith(f"{name}-") and "-vs-" in w for w in written), (name, sorted(written))
    assert "sys-step_seconds_mean-vs-system_chips.png" in written
    assert not any("system_network_0_size" in w for w in written)  # a [[zip]] partner of system.chips


def test_a_column_some_sweeps_lack_is_one_line_and_the_others_are_drawn(tree, capsys):
    argv = ["report", str(tree), "--out", str(tree / "asked"), "--x", "system_chips", "--hue",
            "workload_experts_skew", "--y", "step_seconds_mean"]
    assert main(argv) == 0
    got = capsys.readouterr()
    assert [p.rsplit("/", 1)[-1] for p in got.out.split() if p.endswith(".png")] == \
        ["sys-step_seconds_mean-vs-system_chips.png"]
    notes = [line for line in got.err.splitlines() if not line.startswith("report: ")]
    assert len(notes) == 1 and "Traceback" not in got.err, got.err
    assert all(w in notes[0] for w in ("system_chips", "step_seconds_mean", "n, nop, race", "drawn for sys"))
    assert main(["report", str(tree), "--out", str(tree / "none"), "--x", "no_such_axis"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--x no_such_axis" in line and "n, nop, race, sys" in line


def _sweep(rows, axes, command="noc"):
    cols = {k: [r.get(k) for r in rows] for k in rows[0]}
    return SweepTables("t", command, axes, pa.table({"point_status": ["ok"] * len(rows), **cols}), {}, {})


@pytest.fixture(scope="module")
def pyplot():
    pytest.importorskip("matplotlib")
    from cluster.report.render import pyplot

    return pyplot()


def _colors(fig):
    """{legend entry: its line's colour} over every panel's lines, as (panel, entry) -> colour."""
    out = {}
    for i, ax in enumerate(a for a in fig.axes if a.get_visible()):
        for series in ax.containers:  # an errorbar series: its label, and its data line first
            out[(i, series.get_label())] = series.lines[0].get_color()
    return out


def test_one_colour_per_value_across_panels_and_figures(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    # the uniform panel has only torus points: per-panel colours would make it torus-blue, mesh-blue elsewhere
    rows = [{"noc_rate": r, "noc_traffic": t, "noc_topology": topo, "avg_latency": 10.0 + r + (topo == "torus")}
            for r in (0.1, 0.2) for t, topos in (("transpose", ("mesh", "torus")), ("uniform", ("torus",)))
            for topo in topos]
    palette = Palette()
    first = metric_vs_axis(_sweep(rows, ["noc_rate", "noc_traffic", "noc_topology"]), "noc_rate", "avg_latency",
                           "noc_topology", pyplot, palette=palette)
    colors = _colors(first)
    assert colors[(0, "torus")] == colors[(1, "torus")] != colors[(0, "mesh")]
    only_torus = [r for r in rows if r["noc_topology"] == "torus"]
    second = metric_vs_axis(_sweep(only_torus, ["noc_rate", "noc_traffic", "noc_topology"]), "noc_rate",
                            "avg_latency", "noc_topology", pyplot, palette=palette)
    assert set(_colors(second).values()) == {colors[(0, "torus")]}  # the next figure too
    pyplot.close(first)
    pyplot.close(second)


def test_panels_whose_scales_differ_get_their_own_y_axis(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    def figure(transpose_scale):
        rows = [{"noc_rate": r, "noc_traffic": t, "avg_latency": (transpose_scale if t == "transpose" else 10.0) * r}
                for r in (0.1, 0.2) for t in ("uniform", "transpose")]
        return metric_vs_axis(_sweep(rows, ["noc_rate", "noc_traffic"]), "noc_rate", "avg_latency", None, pyplot)

    apart, close = figure(1000.0), figure(20.0)  # 100x against 2x
    panels = {ax.get_title(): ax for ax in apart.axes[:2]}
    a0, a1 = panels["noc.traffic = uniform"], panels["noc.traffic = transpose"]
    assert not a0.get_shared_y_axes().joined(a0, a1) and a0.get_ylim()[1] < 5 < a1.get_ylim()[1]
    assert a0.get_ylabel() == a1.get_ylabel() == "mean packet latency (cycles)"  # each panel says what it shows
    c0, c1 = close.axes[:2]
    assert c0.get_shared_y_axes().joined(c0, c1)
    pyplot.close(apart)
    pyplot.close(close)


def test_engineering_prefixes_known_answers():
    assert units.engineering(5e-5, "J") == "50 \u00b5J" and units.engineering(2.5e10, "B/s") == "25 GB/s"
    assert units.engineering(1536, "B") == "1.536 kB" and units.engineering(0.1, "flits/node/cycle") == \
        "0.1 flits/node/cycle"
    assert units.engineering(16, "") == "16" and units.scale(0.00005, "cycles") == (1.0, "cycles")


def test_ticks_titles_and_legends_carry_prefixed_units(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{"system_chips": c, "system_network_0_link_bandwidth": bw, "workload_experts_skew": s,
             "energy_per_token_joules": 5e-5 * c / (1 + s)}
            for c in (4, 8) for bw in (2.5e10, 2e11) for s in (0.0, 1.5)]
    sweep = _sweep(rows, ["system_chips", "system_network_0_link_bandwidth", "workload_experts_skew"], "system")
    fig = metric_vs_axis(sweep, "system_chips", "energy_per_token_joules", "workload_experts_skew", pyplot)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_ylabel() == "energy per token (\u00b5J)"
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ticks and all("e" not in t and 0 <= float(t) < 500 for t in ticks), ticks  # 25..400 uJ, not 0.00005
    assert sorted(a.get_title() for a in fig.axes if a.get_visible() and a.get_title()) == \
        ["system.network[0].link_bandwidth = 200 GB/s", "system.network[0].link_bandwidth = 25 GB/s"]
    xs = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert {"4", "8"} <= set(xs) and all(x.isdigit() for x in xs), xs  # whole chips, never 4.5
    pyplot.close(fig)


def test_a_wide_grid_s_heatmap_labels_do_not_run_together(pyplot):
    from cluster.report.figures import link_heatmap

    links = pa.table({"src_row": [r for r in range(4) for _ in range(16)], "src_col": list(range(16)) * 4,
                      "direction": ["E"] * 64, "utilization": [0.1] * 64})
    fig = link_heatmap({"noc_links": links}, pyplot)
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    assert 4 <= len(labels) <= 8
    boxes = [t.get_window_extent() for t in labels]
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))  # no two labels overlap
    pyplot.close(fig)


def test_per_point_figures_say_which_point(tree, pyplot, monkeypatch):
    from cluster.report import render

    titles = {}
    monkeypatch.setattr(render, "_save", lambda fig, path, plt, formats: (
        titles.__setitem__(path.name, fig._suptitle.get_text() if fig._suptitle else ""), plt.close(fig), [])[-1])
    render.write_report(tree, tree / "titles", workers=1)  # one process: the titles are seen here
    point = [n for n in titles if n.startswith("race-point-")]
    assert point
    for name in point:
        pid = name[len("race-point-"):].split("-")[0]
        assert titles[name].startswith(f"race, point {pid}: memory.reclaim = "), titles[name]


def test_all_zero_metrics_are_left_out_unless_asked(pyplot):
    from cluster.report.sweep_figures import default_metrics, metric_vs_axis

    rows = [{"memory_policy": p, "bytes_copied": 0, "tokens_per_second": v, "workload": "kv-decode",
             "status": "completed"} for p, v in (("virtual", 3.0), ("static-multi", 2.0))]
    sweep = _sweep(rows, ["memory_policy"], "run")
    assert default_metrics(sweep) == ["tokens_per_second"]
    with pytest.raises(Skip, match="every value of bytes_copied is 0"):
        metric_vs_axis(sweep, "memory_policy", "bytes_copied", None, pyplot)
    pyplot.close(metric_vs_axis(sweep, "memory_policy", "bytes_copied", None, pyplot, explicit=True))

"""rdasim report: figures from run outputs and sweeps; figures whose tables are absent are skipped."""

import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from cluster.report.data import Skip, grouped
from cluster.report.figures import link_heatmap, memory_over_time
from cluster.report.sources import SweepTables

PNG = b"\x89PNG\r\n\x1a\n"


def test_grouped_means_known_answer():
    t = pa.table({"x": [1, 2, 1, 2, 1], "y": [1.0, 10.0, 3.0, None, 5.0], "h": ["a", "a", "a", "b", "b"]})
    assert grouped(t, "x", "y") == {None: ([1, 2], [3.0, 10.0], [1.0, 10.0], [5.0, 10.0])}
    assert grouped(t, "x", "y", "h") == {"a": ([1, 2], [2.0, 10.0], [1.0, 10.0], [3.0, 10.0]),
                                         "b": ([1], [5.0], [5.0], [5.0])}


def test_without_matplotlib_report_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    pq.write_table(pa.table({"rate": [0.1], "avg_latency": [12.0]}), tmp_path / "noc_summary.parquet")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["report", str(tmp_path)]) == 2
    assert "pip install -e '.[report]'" in capsys.readouterr().err


def test_a_directory_without_results_is_a_clear_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "no rdasim results" in capsys.readouterr().err


@pytest.fixture(scope="module")
def pyplot():
    pytest.importorskip("matplotlib")
    from cluster.report.render import pyplot

    return pyplot()


def test_link_heatmap_puts_each_link_at_its_router(pyplot):
    links = pa.table({"offered_rate": [0.2] * 3 + [0.1], "src_row": [0, 1, 1, 1], "src_col": [0, 2, 0, 0],
                      "direction": ["E", "E", "S", "E"], "utilization": [0.5, 0.25, 0.75, 0.9]})
    fig = link_heatmap({"noc_links": links}, pyplot)
    east = fig.axes[0].images[0].get_array()
    south = fig.axes[2].images[0].get_array()
    assert east.shape == (2, 3)
    assert east[0, 0] == 0.5 and east[1, 2] == 0.25 and np.ma.getmaskarray(east)[1, 0]  # 0.9 was at the lower load
    assert south[1, 0] == 0.75
    pyplot.close(fig)


def test_memory_figures_are_skipped_until_their_tables_exist(pyplot):
    with pytest.raises(Skip):
        memory_over_time({"noc_links": pa.table({"src_row": [0]})}, pyplot)


def test_report_of_a_noc_run_draws_its_figures_and_skips_the_memory_ones(tmp_path, pyplot, capsys):
    assert main(["noc", "--k", "4", "--rates", "0.1,0.3", "--set", "noc.warmup_cycles=100",
                 "--set", "noc.measure_cycles=200", "--out", str(tmp_path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path), "--formats", "png,pdf,svg"]) == 0
    out, err = capsys.readouterr()
    written = {p.split("/")[-1] for p in out.split()}
    assert written == {f"{name}.{fmt}" for name in ("latency_vs_load", "link_utilization")
                       for fmt in ("png", "pdf", "svg")}
    figures = tmp_path / "_figures"
    assert all((figures / w).read_bytes().startswith(PNG) for w in written if w.endswith(".png"))
    assert all((figures / w).read_bytes().startswith(b"%PDF") for w in written if w.endswith(".pdf"))
    assert all(b"<svg" in (figures / w).read_bytes()[:2000] for w in written if w.endswith(".svg"))
    (line,) = err.strip().splitlines()  # one line on stderr; the skipped figures listed once, in a file
    assert line.startswith("report: 2 figures (PDF, PNG, SVG)") and "5 skipped, listed in" in line, line
    listed = (figures / "skipped.txt").read_text()
    for skipped in ("mu_utilization", "memory_over_time", "messages", "ttft_breakdown"):
        assert f"skipped {skipped}" in listed


def test_report_draws_memory_figures_from_run_tables(tmp_path, pyplot, capsys):
    cycles = np.repeat(np.arange(0, 1000, 100), 4)
    mu = np.tile(np.arange(4), 10)
    pq.write_table(pa.table({"cycle": cycles, "mu": mu, "mu_row": mu // 2, "mu_col": mu % 2,
                             "utilization": (cycles / 1000.0) * (mu + 1) / 4}), tmp_path / "run_mu_series.parquet")
    pq.write_table(pa.table({"tokens_per_second": [1.0], "messages_read": [10], "messages_ref_inc": [3]}),
                   tmp_path / "run_summary.parquet")
    assert main(["report", str(tmp_path), "--quiet"]) == 0
    written = {p.split("/")[-1] for p in capsys.readouterr().out.split() if p.endswith(".png")}
    assert written == {"mu_utilization.png", "memory_over_time.png", "messages.png"}


def test_report_of_a_sweep_plots_metrics_against_its_axes(tmp_path, pyplot, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(textwrap.dedent("""
        [sweep]
        name = "s"
        command = "noc"
        [base]
        noc.k = 4
        noc.warmup_cycles = 100
        noc.measure_cycles = 200
        [axes]
        noc.rate = [0.1, 0.3]
        noc.vcs = [2, 4]
    """))
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--in-process", "--quiet"]) == 0
    assert main(["report", str(tmp_path / "out"), "--y", "avg_latency", "--quiet"]) == 0
    written = {p.split("/")[-1] for p in capsys.readouterr().out.split()}
    assert written == {f"s-avg_latency-vs-{x}.{fmt}" for x in ("noc_rate", "noc_vcs") for fmt in ("png", "pdf")}
    assert main(["report", str(tmp_path / "out"), "--out", str(tmp_path / "all"), "--quiet"]) == 0
    written = {p.split("/")[-1] for p in capsys.readouterr().out.split()}
    assert any(w.startswith("s-point-") and w.endswith("link_utilization.png") for w in written)


def _sweep(rows: list[dict], axes: list[str], command: str = "noc", orders=None) -> SweepTables:
    cols = {k: [r.get(k) for r in rows] for k in rows[0]}
    return SweepTables("t", command, axes, pa.table({"point_status": ["ok"] * len(rows), **cols}), {}, orders or {})


def test_seeds_become_a_mean_with_a_95_percent_confidence_interval(pyplot):
    """Known answer: values 1, 2, 3 have mean 2, sd 1, and t(0.975, 2) = 4.302653, so the CI is 4.302653 / sqrt 3."""
    from cluster.report.cells import panels
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{"noc_rate": 0.1, "run_seed": s, "avg_latency": float(s)} for s in (1, 2, 3)]
    ((series,),) = [p.series for p in panels(rows, "noc_rate", "avg_latency", None, [], {})]
    cell = series.cells[0.1]
    assert cell.mean == 2.0 and abs(cell.error - 4.302653 / 3 ** 0.5) < 1e-5 and len(cell.values) == 3
    fig = metric_vs_axis(_sweep(rows, ["noc_rate", "run_seed"]), "noc_rate", "avg_latency", None, pyplot)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "noc.rate (flits/node/cycle)" and ax.get_ylabel() == "mean packet latency (cycles)"
    assert "run_seed" not in ax.get_xlabel() and "mean of 3 seeds per point; error bars: 95 % confidence interval" \
        in fig._suptitle.get_text()
    pyplot.close(fig)


def test_other_axes_become_panels_not_an_average(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{"noc_rate": r, "noc_traffic": t, "noc_topology": topo, "avg_latency": lat}
            for r in (0.1, 0.2) for t, lat0 in (("uniform", 10.0), ("transpose", 100.0))
            for topo, lat in (("mesh", lat0 + r), ("torus", lat0 + 2 * r))]
    sweep = _sweep(rows, ["noc_rate", "noc_traffic", "noc_topology"])
    fig = metric_vs_axis(sweep, "noc_rate", "avg_latency", "noc_topology", pyplot)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    titles = sorted(ax.get_title() for ax in panels)
    assert titles == ["noc.traffic = transpose", "noc.traffic = uniform"]
    for ax in panels:  # every plotted y is one condition's value, never a mean of the two traffics
        base = 100.0 if "transpose" in ax.get_title() else 10.0
        ys = sorted(round(y, 6) for line in ax.get_lines() for y in line.get_ydata() if len(line.get_ydata()) == 2)
        assert ys and all(base < y < base + 1 for y in ys)
    pyplot.close(fig)


def test_categorical_axes_are_bars_in_the_spec_s_order(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{"memory_reclaim": r, "tokens_per_second": v, "workload": "moe", "status": "completed"}
            for r, v in (("refcount", 3.0), ("refcount-gated", 2.0), ("partial-free", 1.0))]
    sweep = _sweep(rows, ["memory_reclaim"], "run", {"memory_reclaim": ["refcount", "refcount-gated", "partial-free"]})
    fig = metric_vs_axis(sweep, "memory_reclaim", "tokens_per_second", None, pyplot)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["refcount", "refcount-gated", "partial-free"]
    assert [round(p.get_height(), 6) for p in ax.patches] == [3.0, 2.0, 1.0]  # bars, not a line across categories
    pyplot.close(fig)


def test_saturated_loads_are_marked_and_runs_that_did_not_complete_leave_the_mean(pyplot):
    from cluster.report.cells import panels
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{"noc_rate": 0.1, "avg_latency": 20.0, "saturated": False},
            {"noc_rate": 0.5, "avg_latency": 900.0, "saturated": True}]
    fig = metric_vs_axis(_sweep(rows, ["noc_rate"]), "noc_rate", "avg_latency", None, pyplot)
    assert "saturated (did not drain)" in [t.get_text() for t in fig.legends[0].get_texts()]
    marked = [c for c in fig.axes[0].collections if len(c.get_offsets()) and c.get_edgecolor().size]
    assert any(list(c.get_offsets()[0]) == [0.5, 900.0] for c in marked)
    pyplot.close(fig)
    runs = [{"memory_policy": "static-multi", "run_seed": s, "tokens_per_second": v, "workload": "moe", "status": st}
            for s, v, st in ((1, 10.0, "completed"), (2, 12.0, "completed"), (3, 0.0, "deadlocked"))]
    ((series,),) = [p.series for p in panels(runs, "memory_policy", "tokens_per_second", None, [], {})]
    cell = series.cells["static-multi"]
    assert cell.mean == 11.0 and cell.partial and cell.gap is None  # the deadlocked seed is not averaged in


def test_identical_series_keep_their_colours_and_say_so(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{"noc_rate": r, "noc_vcs": v, "avg_latency": 10.0 + r} for r in (0.1, 0.2) for v in (2, 4)]
    fig = metric_vs_axis(_sweep(rows, ["noc_rate", "noc_vcs"]), "noc_rate", "avg_latency", "noc_vcs", pyplot)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["2", "4 (= 2)"]  # 4's line lies under 2's
    colours = {c.get_label(): c.lines[0].get_color() for c in fig.axes[0].containers}
    assert colours["2"] != colours["4 (= 2)"]
    pyplot.close(fig)


def test_energy_by_policy_stacks_the_components_to_each_run_total(pyplot):
    from cluster.report.sweep_figures import energy_vs_axis

    # two seeds per policy: each bar is the mean of its seeds, its segments the mean components
    rows = [{"memory_policy": p, "run_seed": seed, "energy_cu_joules": cu, "energy_mu_joules": mu,
             "energy_realloc_copy_joules": copy}
            for p, seed, cu, mu, copy in (("virtual", 1, 1.0, 4.0, 0.0), ("virtual", 2, 3.0, 4.0, 0.0),
                                          ("realloc-copy", 1, 2.0, 5.0, 1.0), ("realloc-copy", 2, 2.0, 7.0, 3.0))]
    fig = energy_vs_axis(_sweep(rows, ["memory_policy", "run_seed"], command="run"), "memory_policy", pyplot)
    tops = {}
    for p in fig.axes[0].patches:
        tops[p.get_x()] = max(tops.get(p.get_x(), 0.0), p.get_y() + p.get_height())
    assert sorted(tops.values()) == [6.0, 10.0]  # virtual 2 + 4 + 0; realloc-copy 2 + 6 + 2
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["CU", "MU", "realloc copy"]  # as a paper writes them
    pyplot.close(fig)


def test_a_run_energy_bar_per_component_stacked_by_action(pyplot):
    from cluster.report.figures import energy_breakdown

    t = pa.table({"component": ["cu", "mu", "mu", "mu", "noc_link"], "action": ["fu_op", "read_byte", "write_byte",
                  "translation", "flit_bit"], "joules": [2.0, 1.0, 0.5, 0.0, 3.0]})
    fig = energy_breakdown({"run_energy": t}, pyplot)
    tops = {}
    for p in fig.axes[0].patches:
        tops[round(p.get_x(), 6)] = max(tops.get(round(p.get_x(), 6), 0.0), p.get_y() + p.get_height())
    assert sorted(tops.values()) == [1.5, 2.0, 3.0] and len(fig.axes[0].patches) == 4  # no bar for 0 J
    assert "6.5 J in all" in fig.axes[0].get_title()
    pyplot.close(fig)


def test_a_compacted_sweep_gives_each_point_its_own_rows_of_every_table(tmp_path):
    """A sweep of 1,000 points and more is compacted (cluster/sweep/compact.py): a point's figures still find
    its rows, the same as in its own files before, and no other point's."""
    from cluster.report.sources import discover
    from cluster.sweep.compact import compact
    from cluster.sweep.plan import plan_sweep
    from cluster.sweep.runner import run_sweep
    from tests.paths import pressure_sweep

    run_sweep(plan_sweep(pressure_sweep(tmp_path)), tmp_path / "out", quiet=True, in_process=True, compact="never")
    (sweep,) = discover(tmp_path / "out").sweeps
    points = sweep.result["point_id"].to_pylist()
    before = {p: sweep.point_tables(p) for p in points}
    assert all(len(t) >= 3 for t in before.values())  # the run's other tables: MU series, energy, ...
    list(compact(tmp_path / "out"))
    assert not list((tmp_path / "out" / "kv").rglob(f"{points[0]}*.parquet"))  # no point file left
    (sweep,) = discover(tmp_path / "out").sweeps
    for p in points:
        after = sweep.point_tables(p)
        assert sorted(after) == sorted(before[p])
        for name, t in after.items():
            assert set(t["point_id"].to_pylist()) == {p}
            assert t.num_rows == before[p][name].num_rows

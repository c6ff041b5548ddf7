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
    assert "pip install 'rdasim[report]'" in capsys.readouterr().err


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
    assert main(["report", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    written = {p.split("/")[-1] for p in out.split()}
    assert written == {"latency_vs_load.png", "link_utilization.png"}
    assert all((tmp_path / "figures" / w).read_bytes().startswith(PNG) for w in written)
    for skipped in ("mu_utilization", "memory_over_time", "messages"):
        assert f"skipped {skipped}" in err


def test_report_draws_memory_figures_from_run_tables(tmp_path, pyplot, capsys):
    cycles = np.repeat(np.arange(0, 1000, 100), 4)
    mu = np.tile(np.arange(4), 10)
    pq.write_table(pa.table({"cycle": cycles, "mu": mu, "mu_row": mu // 2, "mu_col": mu % 2,
                             "utilization": (cycles / 1000.0) * (mu + 1) / 4}), tmp_path / "run_mu_series.parquet")
    pq.write_table(pa.table({"tokens_per_second": [1.0], "messages_read": [10], "messages_ref_inc": [3]}),
                   tmp_path / "run_summary.parquet")
    assert main(["report", str(tmp_path), "--quiet"]) == 0
    written = {p.split("/")[-1] for p in capsys.readouterr().out.split()}
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
    assert {"s-latency_vs_load.png", "s-avg_latency-vs-noc_rate.png", "s-avg_latency-vs-noc_vcs.png"} <= written
    assert any(w.startswith("s-point-") and w.endswith("link_utilization.png") for w in written)


def test_energy_by_policy_stacks_the_components_to_each_run_total(pyplot):
    from cluster.report.sources import SweepTables
    from cluster.report.sweep_figures import energy_vs_axis

    # two points per policy: each bar is the mean of its points, its segments the mean components
    t = pa.table({"memory_policy": ["virtual", "virtual", "realloc-copy", "realloc-copy"],
                  "point_status": ["ok"] * 4, "energy_cu_joules": [1.0, 3.0, 2.0, 2.0],
                  "energy_mu_joules": [4.0, 4.0, 5.0, 7.0], "energy_realloc_copy_joules": [0.0, 0.0, 1.0, 3.0]})
    fig = energy_vs_axis(SweepTables("s", "run", ["memory_policy"], t), "memory_policy", pyplot)
    bars = {(p.get_x(), p.get_y()): p.get_height() for p in fig.axes[0].patches}
    tops = {}
    for (x, y), h in bars.items():
        tops[x] = max(tops.get(x, 0.0), y + h)
    assert sorted(tops.values()) == [6.0, 10.0]  # virtual 2 + 4 + 0; realloc-copy 2 + 6 + 2
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["cu", "mu", "realloc_copy"]
    pyplot.close(fig)

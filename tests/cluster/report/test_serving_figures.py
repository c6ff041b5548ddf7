"""A serving sweep's report: its latency percentiles, goodput, SLO attainment and throughput drawn by default,
short axis labels with units (never a schema line), intervals only from 3 seeds (fewer: the seeds' values),
and no figure from a column that is 0 everywhere (skipped, with the reason)."""

import pyarrow as pa
import pytest

from cluster.report import labels
from cluster.report.data import Skip
from cluster.report.figures import memory_over_time, mu_heatmap
from cluster.report.sources import SweepTables
from cluster.results import schemas


@pytest.fixture(scope="module")
def pyplot():
    pytest.importorskip("matplotlib")
    from cluster.report.render import pyplot

    return pyplot()


def _serve_rows(seeds=(1,)):
    """A policy sweep of a serving run: TTFT in tenths of a second (the label must say ms, not s)."""
    return [{"point_status": "ok", "workload": "serve", "status": "completed", "memory_policy": p, "run_seed": s,
             "ttft_p50_seconds": 0.2 + 0.01 * s + (0.1 if p == "static-single" else 0.0),
             "ttft_p99_seconds": 0.4 + 0.01 * s, "tbt_p50_seconds": 0.02, "tbt_p99_seconds": 0.13,
             "goodput_requests_per_second": 1.5, "slo_attainment": 0.75, "tokens_per_second": 12.0,
             "peak_mu_utilization": 0.0, "sim_seconds": 4.0}
            for p in ("virtual", "static-single") for s in seeds]


def _sweep(rows, axes=("memory_policy", "run_seed")):
    cols = {k: [r.get(k) for r in rows] for k in rows[0]}
    return SweepTables("serve", "run", list(axes), pa.table(cols), {}, {})


def test_a_serving_sweep_draws_latency_goodput_attainment_and_throughput_by_default():
    from cluster.report.sweep_figures import default_metrics

    assert default_metrics(_sweep(_serve_rows())) == [
        "ttft_p50_seconds", "ttft_p99_seconds", "tbt_p50_seconds", "tbt_p99_seconds",
        "goodput_requests_per_second", "slo_attainment", "tokens_per_second"]


def test_a_latency_axis_is_a_short_name_with_its_prefixed_unit(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    fig = metric_vs_axis(_sweep(_serve_rows()), "memory_policy", "ttft_p99_seconds", None, pyplot)
    assert fig.axes[0].get_ylabel() == "p99 TTFT (ms)"  # 0.41 s drawn as 410: the label says ms
    assert [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()][-1] in ("400", "450", "500")
    pyplot.close(fig)


def test_no_column_of_any_table_is_labelled_with_its_schema_line():
    for table in schemas.ALL_TABLES:
        for c in table.columns:
            text, _ = labels.metric_parts(c.name)
            assert len(text) <= 45 and (text != c.doc or len(c.doc) <= labels.SHORT_DOC), (c.name, text)


@pytest.mark.parametrize("seeds, error, dots", [((1, 2), False, 2), ((1, 2, 3), True, 0)])
def test_an_interval_needs_three_seeds_fewer_are_drawn_as_they_are(pyplot, seeds, error, dots):
    """Two seeds' 95 % Student's t interval is 12.7 standard errors wide (t at 1 degree of freedom): it runs
    below zero for any spread, so two seeds are drawn as two dots beside their mean, not an interval."""
    from cluster.report.sweep_figures import metric_vs_axis

    fig = metric_vs_axis(_sweep(_serve_rows(seeds)), "memory_policy", "ttft_p50_seconds", None, pyplot)
    ax = fig.axes[0]
    has_error = any(c.__class__.__name__ == "LineCollection" for c in ax.collections)
    seed_dots = sum(len(c.get_offsets()) for c in ax.collections if c.__class__.__name__ == "PathCollection")
    assert has_error == error and seed_dots == dots * 2  # each of the two policies' bars
    said = fig._suptitle.get_text()
    assert ("dots: each seed" in said) == (not error) and ("confidence interval" in said) == error
    bottom = ax.get_ylim()[0]
    assert bottom >= 0
    pyplot.close(fig)


def test_an_mu_figure_of_a_run_holding_nothing_in_mus_is_skipped_with_the_reason(pyplot):
    series = pa.table({"cycle": [0, 10, 0, 10], "mu": [0, 0, 1, 1], "row": [0, 0, 0, 0], "col": [0, 0, 1, 1],
                       "utilization": [0.0, 0.0, 0.0, 0.0]})
    with pytest.raises(Skip, match="utilization of run_mu_series is 0 at every MU"):
        mu_heatmap({"run_mu_series": series}, pyplot)
    with pytest.raises(Skip, match="is 0 \\(or null\\) at every sample"):
        memory_over_time({"run_mu_series": series}, pyplot)
    held = series.set_column(4, "utilization", pa.array([0.0, 0.5, 0.0, 0.25]))
    pyplot.close(mu_heatmap({"run_mu_series": held}, pyplot))


def _requests(parts):
    """run_requests rows of (queueing, prefill, interference) seconds; a refused request's are null."""
    return {"run_requests": pa.table({"request": list(range(len(parts))),
                                      "queueing_seconds": [p and p[0] for p in parts],
                                      "prefill_seconds": [p and p[1] for p in parts],
                                      "interference_seconds": [p and p[2] for p in parts]})}


def test_the_ttft_breakdown_stacks_each_requests_three_parts(pyplot):
    """Two requests of 10 + 30 + 0 ms and 20 + 10 + 30 ms: bars of those heights in ms, stacked in order;
    the title's shares are of all TTFT (30/100, 40/100, 30/100); a refused request is left out."""
    from cluster.report.figures import ttft_breakdown

    fig = ttft_breakdown(_requests([(0.010, 0.030, 0.0), (0.020, 0.010, 0.030), None]), pyplot)
    ax = fig.axes[0]
    bars = [(round(b.get_x() + b.get_width() / 2), b.get_y(), b.get_height()) for b in ax.patches]
    assert [(x, pytest.approx(y), pytest.approx(h)) for x, y, h in bars] == [
        (0, 0, 10), (1, 0, 20), (0, 10, 30), (1, 20, 10), (0, 40, 0), (1, 30, 30)]
    assert ax.get_ylabel() == "time to first token (ms)"
    assert ax.get_title() == "TTFT breakdown of 2 requests\nqueueing 30%, prefill 40%, interference 30% of all TTFT"


def test_many_requests_are_drawn_by_ttft_rank_and_none_is_skipped(pyplot):
    from cluster.report.figures import ttft_breakdown

    fig = ttft_breakdown(_requests([(0.001 * (i % 7), 0.002, 0.0005 * i) for i in range(100)]), pyplot)
    assert fig.axes[0].get_xlabel() == "requests by TTFT (fastest first)"
    with pytest.raises(Skip, match="no request has a TTFT split"):
        ttft_breakdown(_requests([None, None]), pyplot)

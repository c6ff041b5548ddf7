"""Figures a paper can use, rendered and inspected: a run that did not complete is never
drawn as a value, one colour per value, titles that never overlap, no panel or slot for a combination the
sweep does not have, one SI prefix per quantity written as the field writes it, a true seed statement,
ticks that never run together; and (item 2) a report that draws only what was asked, in parallel, with
one line on stderr and the skipped figures listed once in a file."""

import itertools

import pyarrow as pa
import pytest

from cluster.cli import main
from cluster.report.sources import SweepTables
from cluster.report.style import Palette

DEADLOCK_SENTINEL = 123.0  # what a deadlocked run reports as its throughput: never to be drawn


@pytest.fixture(scope="module")
def pyplot():
    pytest.importorskip("matplotlib")
    from cluster.report.render import pyplot

    return pyplot()


def _row(policy, oom, spill, seed, requests=16):
    """A run of the issue's policy sweep: realloc-copy deadlocks, and so does virtual without spill under stall."""
    dead = policy == "realloc-copy" or (policy == "virtual" and spill == "none" and oom == "stall")
    tokens = {"virtual": 180e3, "static-single": 170e3}.get(policy, 0.0) * (1.1 if oom == "evict" else 1.0)
    tokens *= 1.05 if spill == "nearest" else 1.0
    return {"point_status": "ok", "workload": "kv-decode", "status": "deadlocked" if dead else "completed",
            "memory_policy": policy, "memory_on_oom": oom, "memory_spill": spill, "run_seed": seed,
            "workload_decode_requests": requests,
            "tokens_per_second": DEADLOCK_SENTINEL if dead else tokens * requests / 16,
            "energy_per_token_joules": None if dead else 1.8e-5 * (0.05 if requests == 32 else 1.0)}


AXES = ["memory_policy", "memory_on_oom", "memory_spill", "run_seed", "workload_decode_requests"]
ORDERS = {"memory_policy": ["virtual", "static-single", "realloc-copy"], "memory_on_oom": ["stall", "evict"],
          "memory_spill": ["none", "nearest"]}


def _sweep(rows, axes=AXES, orders=ORDERS):
    cols = {k: [r.get(k) for r in rows] for k in {k for r in rows for k in r}}
    return SweepTables("kv-policies", "run", axes, pa.table(cols), {}, orders)


def _policy_rows(requests=(16,)):
    """Every policy x on_oom x seed without spill; spill = "nearest" only under virtual (invalid elsewhere)."""
    rows = [_row(p, o, "none", s, r) for p, o, s, r in itertools.product(ORDERS["memory_policy"], ("stall", "evict"),
                                                                         (1, 2), requests)]
    return rows + [_row("virtual", o, "nearest", s, r) for o, s, r in itertools.product(("stall", "evict"), (1, 2),
                                                                                           requests)]


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()] if fig.legends else []


def _gap_marks(ax) -> list:
    """Lines drawn as a lone marker in axes coordinates on the baseline (the gap marks)."""
    return [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 1 and ln.get_marker() not in (None, "None", "")]


def test_a_run_that_did_not_complete_is_a_marked_gap_never_a_value(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    sweep = _sweep(_policy_rows())
    for y in ("tokens_per_second", "energy_per_token_joules"):  # a sentinel number, and a null
        fig = metric_vs_axis(sweep, "memory_policy", y, "memory_spill", pyplot)
        heights = [p.get_height() for ax in fig.axes for p in ax.patches]
        assert heights and DEADLOCK_SENTINEL not in heights
        assert "deadlocked: no value" in _legend(fig)
        for ax in fig.axes:  # realloc-copy deadlocked everywhere: a mark at its place, never a bar
            labels = [t.get_text() for t in ax.get_xticklabels()]
            at = labels.index("realloc-copy")
            assert any(abs(m.get_xdata()[0] - at) < 0.5 and m.get_marker() == "X" for m in _gap_marks(ax))
            assert not any(abs(p.get_x() + p.get_width() / 2 - at) < 0.5 for p in ax.patches)
        pyplot.close(fig)


def test_one_colour_per_value_in_every_panel_and_figure_even_when_series_coincide(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    rows = _policy_rows(requests=(16, 32))
    for r in rows:  # under static-single, evict gives exactly stall's throughput (the "identical")
        if r["memory_policy"] == "static-single" and r["status"] == "completed":
            r["tokens_per_second"] = 170e3 * r["workload_decode_requests"] / 16
    palette, colours = Palette(), {}
    for hue, x in (("memory_on_oom", "memory_policy"), ("memory_on_oom", "memory_spill")):
        fig = metric_vs_axis(_sweep(rows), x, "tokens_per_second", hue, pyplot, palette=palette)
        for ax in fig.axes:
            for container in ax.containers:
                value = container.get_label()
                assert value in ("stall", "evict"), value  # an entry names one value, never "stall, evict"
                for bar in container.patches:
                    colours.setdefault(value, set()).add(bar.get_facecolor())
        pyplot.close(fig)
    assert all(len(c) == 1 for c in colours.values()) and colours["stall"] != colours["evict"]


def _boxes(fig):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    named = [("suptitle", fig._suptitle)] + [("legend", leg) for leg in fig.legends]
    for i, ax in enumerate(fig.axes):
        named += [(f"title {i}", ax.title), (f"xlabel {i}", ax.xaxis.label), (f"ylabel {i}", ax.yaxis.label)]
        named += [(f"xtick {i}.{j}", t) for j, t in enumerate(ax.get_xticklabels()) if t.get_text()]
    return [(n, a.get_window_extent(r)) for n, a in named if a is not None and (not hasattr(a, "get_text")
                                                                                 or a.get_text())]


def test_titles_labels_and_ticks_never_overlap(pyplot):
    """Three conditions a panel (the issue's messages figure ran its titles together): every text box apart."""
    from cluster.report.sweep_figures import messages_vs_axis, metric_vs_axis

    rows = _policy_rows(requests=(16, 32))
    for r in rows:
        r["messages_read_request"], r["messages_append"] = 3000, 2500
    sweep = _sweep(rows)
    for fig in (messages_vs_axis(sweep, "memory_policy", pyplot),
                metric_vs_axis(sweep, "memory_on_oom", "tokens_per_second", None, pyplot)):
        boxes = _boxes(fig)
        clash = [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)
                 and not (a.startswith("ylabel") and b.startswith("ylabel"))]
        assert not clash, clash
        pyplot.close(fig)


def test_no_panel_or_slot_for_a_combination_the_sweep_does_not_have(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    fig = metric_vs_axis(_sweep(_policy_rows()), "memory_policy", "energy_per_token_joules", "memory_on_oom", pyplot)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["memory.spill = none", "memory.spill = nearest"]  # nearest exists only under virtual
    nearest = fig.axes[1]
    assert [t.get_text() for t in nearest.get_xticklabels()] == ["virtual"]
    for ax in fig.axes:  # no empty panel: every one draws a value or says why there is none
        assert ax.patches or _gap_marks(ax)
    pyplot.close(fig)


def test_one_si_prefix_per_quantity_written_as_the_field_writes_it(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    # requests = 32 has 20x smaller values: its own y axis, the same prefix and label (µJ, not J beside uJ)
    fig = metric_vs_axis(_sweep(_policy_rows(requests=(16, 32))), "memory_policy", "energy_per_token_joules",
                         "memory_spill", pyplot)
    fig.canvas.draw()
    labels = {ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()}
    assert labels == {"energy per token (\u00b5J)"}
    for ax in fig.axes:
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        assert ticks and all("e" not in t for t in ticks) and not ax.yaxis.get_offset_text().get_text()
    pyplot.close(fig)


@pytest.mark.parametrize("seeds,spread,said", [
    ((1,), False, "1 seed per point"),
    ((1, 2), False, "seeds identical: 2 per point gave the same value"),
    ((1, 2, 3), True, "mean of 3 seeds per point; error bars: 95 % confidence interval"),
])
def test_the_seed_statement_is_true(pyplot, seeds, spread, said):
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{**_row(p, "evict", "none", s), "tokens_per_second": 1000.0 + (s if spread else 0)}
            for p in ("virtual", "static-single") for s in seeds]
    fig = metric_vs_axis(_sweep(rows), "memory_policy", "tokens_per_second", None, pyplot)
    assert said in fig._suptitle.get_text()
    pyplot.close(fig)
    explicit = rows + [{**_row("realloc-copy", "preempt", "none", 1), "status": "completed"}]  # a hand point: 1 seed
    fig = metric_vs_axis(_sweep(explicit), "memory_policy", "tokens_per_second", None, pyplot)
    if len(seeds) > 1:
        assert f"1-{len(seeds)} per point" in fig._suptitle.get_text() or f"1-{len(seeds)} seeds" in \
            fig._suptitle.get_text()
    pyplot.close(fig)


def test_ticks_are_engineering_numbers_that_never_run_together(pyplot):
    from cluster.report.sweep_figures import metric_vs_axis

    rows = [{"point_status": "ok", "noc_rate": r, "tokens_per_second": 660000.0 + 10000 * r} for r in range(6)]
    sweep = SweepTables("t", "noc", ["noc_rate"], pa.table({k: [r[k] for r in rows] for k in rows[0]}), {}, {})
    fig = metric_vs_axis(sweep, "noc_rate", "tokens_per_second", None, pyplot)
    fig.canvas.draw()
    ax = fig.axes[0]
    ticks = [t for t in ax.get_yticklabels() if t.get_text()]
    assert all(t.get_text().endswith("k") for t in ticks), [t.get_text() for t in ticks]  # 660k, 670k, ...
    assert len({t.get_text() for t in ticks}) == len(ticks) and not ax.yaxis.get_offset_text().get_text()
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    assert all(not a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    pyplot.close(fig)


@pytest.fixture(scope="module")
def noop_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("noop")
    spec = tmp / "s.toml"
    spec.write_text('[sweep]\nname = "n"\ncommand = "noop"\n[axes]\nnoop.value = [1.0, 2.0, 3.0]\n'
                    'noop.sleep = [0.0, 0.001]\n')
    assert main(["sweep", str(spec), "--out", str(tmp / "out"), "--in-process", "--quiet"]) == 0
    return tmp / "out"


def test_only_what_was_asked_is_drawn_with_one_line_on_stderr(noop_sweep, pyplot, capsys):
    assert main(["report", str(noop_sweep), "--out", str(noop_sweep / "asked"), "--x", "noop_value",
                 "--y", "value"]) == 0
    got = capsys.readouterr()
    assert [p.rsplit("/", 1)[-1] for p in got.out.split()] == ["n-value-vs-noop_value.png",
                                                               "n-value-vs-noop_value.pdf"]  # no point figures
    (line,) = got.err.strip().splitlines()
    assert line.startswith("report: 1 figure (PDF, PNG) in ") and "skipped" not in line
    assert main(["report", str(noop_sweep), "--out", str(noop_sweep / "all")]) == 0
    (line,) = capsys.readouterr().err.strip().splitlines()  # the point's figures have no tables: skipped, in a file
    assert "skipped, listed in" in line and (noop_sweep / "all" / "skipped.txt").read_text().startswith("skipped ")


def test_figures_drawn_in_parallel_are_the_figures_drawn_in_one_process(noop_sweep, pyplot):
    from cluster.report.render import Options, write_report

    one = write_report(noop_sweep, noop_sweep / "one", Options(formats=("png",)), workers=1)
    two = write_report(noop_sweep, noop_sweep / "two", Options(formats=("png",)), workers=2)
    assert [p.name for p in one.written] == [p.name for p in two.written] and one.written
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(one.written, two.written))
    assert one.skipped == two.skipped

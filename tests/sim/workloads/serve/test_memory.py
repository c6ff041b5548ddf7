"""A serve run's memory is its steps' memory: the run's MU figures from the anchors that priced its
steps (peaks the largest, means weighted by each step's cycles) and its tier traffic the steps'.

Known answers: the summary's HBM bytes are the sums of run_steps' (exactly); its mean MU
utilisation and fragmentation are the duration-weighted figures computed here by hand from
run_anchors, each step matched to its anchor by the rounding rule (every shape rounds to one
token at these ratios: a step that reads cached K/V is priced by the anchor that reads one, a
step that reads none by the one that reads none).
"""

from __future__ import annotations

import pytest

from tests.sim.chip.chiprun import run
from tests.sim.workloads.serve.test_scheduler import serve, trace_file


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    path = trace_file(tmp_path_factory.mktemp("trace"), [(0, 40, 4), (0.00001, 20, 3)])
    return run(serve(path))


def test_the_summary_moves_the_bytes_its_steps_move(done):
    s, steps = done.summary, done.tables["steps"]
    assert s["hbm_read_bytes"] == sum(steps["read_bytes"]) > 15 * 10**9 * len(steps["read_bytes"])
    assert s["hbm_write_bytes"] == sum(steps["written_bytes"])
    assert s["ddr_read_bytes"] == s["ddr_write_bytes"] == 0  # no swaps: nothing in DDR
    a = done.tables["anchors"]
    per_flow = {(k, r): b / f for k, r, b, f in zip(a["keys"], a["kv_read"], a["tier_bytes"], a["tier_flows"])}
    assert s["hbm_flows"] == sum(-(-(rb + wb) // per_flow[(1, 1 if kv else 0)])
                                 for rb, wb, kv in zip(steps["read_bytes"], steps["written_bytes"], steps["kv_read"]))
    assert s["memory_priced"] is True


def test_the_mu_figures_are_the_steps_anchors_weighted_by_step_time(done):
    s, steps, a = done.summary, done.tables["steps"], done.tables["anchors"]
    assert len(a["kv_read"]) == 2 and sorted(a["kv_read"]) == [0, 1]
    by = {r: i for i, r in enumerate(a["kv_read"])}
    rows = [(e - b, by[1 if kv else 0]) for b, e, kv in zip(steps["start"], steps["end"], steps["kv_read"])]
    span = sum(d for d, _ in rows)
    used = sum(d * a["mu_mean"][i] for d, i in rows)
    reserved = sum(d * a["mu_reserved_mean"][i] for d, i in rows)
    assert {i for _, i in rows} == {0, 1}  # both anchors priced steps: the weights matter
    assert s["mean_mu_utilization"] == pytest.approx(used / span, rel=1e-12)
    assert s["fragmentation"] == pytest.approx(1 - used / reserved, rel=1e-12)
    assert s["peak_mu_utilization"] == max(a["mu_peak"]) and s["peak_mu_reserved"] == max(a["mu_reserved_peak"])
    for i in range(2):  # an anchor's plan holds tiles in its MUs, never more than it reserves
        assert 0 < a["mu_mean"][i] <= a["mu_peak"][i] <= a["mu_reserved_peak"][i] <= 1
        assert a["mu_mean"][i] <= a["mu_reserved_mean"][i]

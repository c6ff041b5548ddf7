"""Serving metrics: TTFT, TBT and end-to-end percentiles and goodput of hand-made traces against a
hand count; a run's rows against their definitions."""

import pytest

from cluster.results import schemas
from sim.serving.metrics import Objectives, RequestLog, meets_p99, request_columns, serving_figures, ttft_parts
from tests.sim.chip.chiprun import listed, run

CLOCK = 1000.0  # 1 kHz: a cycle is a millisecond, so the hand count reads in cycles


def _logs():
    # request: arrival, token cycles
    return [
        RequestLog(0, 0, 0, (2, 3, 5), 0, "ok"),  # TTFT 2, gaps 1 2, e2e 5, mean TBT 1.5
        RequestLog(1, 1, 1, (5, 6), 1, "ok"),  # TTFT 4, gap 1, e2e 5, mean TBT 1
        RequestLog(2, 2, 3, (4, 4, 4, 10), 0, "ok"),  # TTFT 2, gaps 0 0 6 (one spec-decode step, then one)
        RequestLog(3, 3, 3, (13,), 2, "ok"),  # TTFT 10, no gap, e2e 10
        RequestLog(4, 4, -1, (), 0, "failed"),  # refused: in the table, not in the percentiles
    ]


def test_percentiles_of_a_hand_made_trace_equal_a_hand_count():
    s, t = serving_figures(_logs(), [], CLOCK, 20 / CLOCK, Objectives())
    # TTFT of the served: 2, 4, 2, 10 -> sorted 2 2 4 10; linear interpolation at rank (n - 1) q / 100
    assert s["ttft_p50_seconds"] == pytest.approx(3e-3)  # rank 1.5: between 2 and 4
    assert s["ttft_p90_seconds"] == pytest.approx(4e-3 + 0.7 * 6e-3)  # rank 2.7: 4 + 0.7 x (10 - 4)
    assert s["ttft_p99_seconds"] == pytest.approx(4e-3 + 0.97 * 6e-3)
    # gaps: 1 2 | 1 | 0 0 6 -> sorted 0 0 1 1 2 6 (n = 6)
    assert s["tbt_p50_seconds"] == pytest.approx(1e-3)  # rank 2.5: 1 and 1
    assert s["tbt_p90_seconds"] == pytest.approx(2e-3 + 0.5 * 4e-3)  # rank 4.5: between 2 and 6
    assert s["tbt_p99_seconds"] == pytest.approx(2e-3 + 0.95 * 4e-3)
    # e2e: 5 4 8 10 -> sorted 4 5 8 10
    assert s["e2e_p50_seconds"] == pytest.approx(6.5e-3)
    assert s["e2e_p99_seconds"] == pytest.approx(8e-3 + 0.97 * 2e-3)
    assert s["requests_finished"] == 4 and s["preempted_requests"] == 2
    assert s["goodput_requests_per_second"] is None  # no objectives
    rows = listed(t["requests"])
    assert rows["ttft_seconds"][:4] == pytest.approx([2e-3, 4e-3, 2e-3, 10e-3])
    assert rows["tbt_mean_seconds"][:3] == pytest.approx([1.5e-3, 1e-3, 2e-3])
    assert rows["tbt_mean_seconds"][3] is None and rows["first_token_seconds"][4] is None
    assert rows["status"] == ["ok"] * 4 + ["failed"]


def test_the_table_holds_a_null_where_a_request_has_no_such_time():
    _, t = serving_figures(_logs(), [], CLOCK, 20 / CLOCK, Objectives())
    table = schemas.RUN_REQUESTS.build(t["requests"], schemas.RunMeta("r1", "abc", 7)).to_pydict()
    assert table["tbt_max_seconds"][:3] == pytest.approx([2e-3, 1e-3, 6e-3])
    assert table["tbt_mean_seconds"][3] is None and table["tbt_max_seconds"][3] is None  # one token: no gap
    assert table["ttft_seconds"][3] == pytest.approx(10e-3)
    failed = {k: v[4] for k, v in table.items()}  # refused: never admitted, no token
    assert [failed[k] for k in ("admitted_seconds", "first_token_seconds", "finished_seconds", "ttft_seconds",
                                "e2e_seconds")] == [None] * 5
    assert failed["arrival_seconds"] == pytest.approx(4e-3) and failed["tokens"] == 0 and not failed["meets_slo"]
    assert table["admitted_seconds"][:4] == pytest.approx([0, 1e-3, 3e-3, 3e-3])
    assert table["run_id"] == ["r1"] * 5 and table["seed"] == [7] * 5


def test_goodput_counts_the_requests_meeting_both_objectives():
    # TTFT <= 3 ms: requests 0 and 2; mean TBT <= 1.5 ms: 0 and 1 (3 has one token: no TBT to miss)
    s, t = serving_figures(_logs(), [], CLOCK, 20 / CLOCK, Objectives(ttft=3e-3, tbt=1.5e-3))
    assert listed(t["requests"])["meets_slo"] == [True, False, False, False, False]
    assert s["goodput_requests_per_second"] == pytest.approx(1 / 0.02)
    assert s["slo_attainment"] == pytest.approx(1 / 5)
    s, _ = serving_figures(_logs(), [], CLOCK, 20 / CLOCK, Objectives(ttft=10e-3))
    assert s["goodput_requests_per_second"] == pytest.approx(4 / 0.02)  # every served one


def test_meets_p99_needs_every_request_served_within_both():
    ok = {"completed": True, "requests_failed": 0, "ttft_p99_seconds": 0.1, "tbt_p99_seconds": 0.01}
    assert meets_p99(ok, Objectives(0.1, 0.01))
    assert not meets_p99(ok, Objectives(0.09, 0.01)) and not meets_p99(ok, Objectives(0.1, 0.009))
    assert not meets_p99({**ok, "completed": False}, Objectives(1, 1))


def test_a_runs_rows_follow_their_definitions():
    raw = {"workload": {"kind": "spec-decode", "decode": {
        "requests": 6, "max_batch": 3, "layers": 2, "heads": 1, "head_dim": 64, "draft": 3, "accept": 0.5,
        "arrival_interval": 2000, "prompt_tokens": {"dist": "fixed", "mean": 20},
        "output_tokens": {"dist": "fixed", "mean": 9}, "slo_ttft": "10us", "slo_tbt": "2us"}}}
    done = run(raw)
    s, t, res = done.summary, done.tables, done.simulation.outcome.reports
    r = listed(t["requests"])
    clock = 1e9  # plasticine
    assert r["request"] == list(range(6)) and r["tokens"] == [9] * 6 and s["requests_finished"] == 6
    logs = sorted((x for q in res for x in q.logged if isinstance(x, RequestLog)), key=lambda x: x.request)
    for i, x in enumerate(logs):
        assert r["first_token_seconds"][i] == pytest.approx(x.token_cycles[0] / clock)
        assert r["ttft_seconds"][i] == pytest.approx(r["first_token_seconds"][i] - r["arrival_seconds"][i])
        assert r["e2e_seconds"][i] == pytest.approx(r["finished_seconds"][i] - r["arrival_seconds"][i])
        assert r["arrival_seconds"][i] <= r["admitted_seconds"][i] < r["first_token_seconds"][i]
        assert list(x.token_cycles) == sorted(x.token_cycles)
    met = [a <= 10e-6 and b <= 2e-6 for a, b in zip(r["ttft_seconds"], r["tbt_mean_seconds"])]
    assert r["meets_slo"] == met
    assert s["goodput_requests_per_second"] == pytest.approx(sum(met) / s["sim_seconds"])
    assert s["first_oom_utilization"] is None and s["preemptions"] == 0
    assert r["prompt_tokens"] == [20] * 6 and s["prompt_tokens"] == 120  # the drawn (fixed) prompts
    assert r["prefill_seconds"] == [None] * 6  # a decode run's prefill steps are not serve steps


def test_a_ttft_splits_into_queueing_prefill_and_interference():
    """Hand-made: arrival 0, admitted at 1, prefill steps of 3 cycles in all, first token at 6: queueing
    1, prefill 3, interference 2; no first token or no admission: null."""
    logs = [RequestLog(0, 0, 1, (6, 7), 0, "ok", 12, 3), RequestLog(1, 2, 2, (4,), 0, "ok", 5, 2),
            RequestLog(2, 3, -1, (), 0, "failed", 9, 0)]
    q, p, i = ttft_parts(logs, CLOCK)
    assert q[:2].tolist() == [0.001, 0.0] and p[:2].tolist() == [0.003, 0.002] and i[:2].tolist() == [0.002, 0.0]
    assert all(x != x for x in (q[2], p[2], i[2]))  # NaN: no first token
    cols = request_columns(logs, CLOCK, Objectives())
    assert cols["prompt_tokens"].tolist() == [12, 5, 9]
    assert cols["ttft_seconds"][:2].tolist() == pytest.approx((q + p + i)[:2].tolist())

"""rdasim evaluate end to end on its fast studies (in-process): the tables hold their references, every
figure names a run stored in the study's dataset, and a second invocation runs no point twice."""

from __future__ import annotations

import json
import re

import pyarrow.dataset as ds
import pytest

from cluster.cli import main
from cluster.evaluate.schedule import makespan
from cluster.evaluate.spec import spec_text
from cluster.evaluate.studies import STUDIES
from cluster.evaluate.studies.spec_decode import leviathan_speedup
from cluster.sweep.plan import plan_sweep

FAST = ("weight-design", "switch", "dse")  # dse: the explore seam end to end (its front read back from the trials)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    out = tmp_path_factory.mktemp("evaluation")
    argv = ["evaluate", "--quick", "--in-process", "--quiet", "--out", str(out)]
    argv += [a for s in FAST for a in ("--only", s)]
    assert main(argv) == 0
    return out, argv


def _rows(out, sweep):
    """A study's stored rows: its sweep's run_summary (an explore's: under its trials dataset)."""
    table = next(p for p in (out / sweep / "run_summary", out / sweep / "trials" / "run_summary") if p.is_dir())
    return ds.dataset(table, format="parquet", partitioning="hive").to_table().to_pylist()


def test_every_check_holds_and_names_stored_runs(evaluated):
    out, _ = evaluated
    data = json.loads((out / "evaluation.json").read_text())
    assert [s["study"] for s in data["studies"]] == list(FAST)
    stored = {r["run_id"] for s in data["studies"] for r in _rows(out, s["sweep"])}
    for study, checks in data["checks"].items():
        assert checks, study
        for c in checks:
            assert c["holds"], f"{study}: {c}"
            assert c["run_ids"] and set(c["run_ids"]) <= stored
    text = (out / "evaluation.md").read_text()
    assert set(re.findall(r"`([0-9a-f]{16}-s1-\d{8}T\d+Z)`", text)) == stored  # every row's run, and no other
    for s in data["studies"]:
        png = out / "figures" / f"{s['sweep']}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"figures/{s['sweep']}.png" in text


def test_weight_requests_vanish_from_top_k_plus_one_bits(evaluated):
    """The closed form, read from the stored rows: halving top_k times needs 2**top_k <= 2**(bits-1)."""
    out, _ = evaluated
    rows = _rows(out, "weight-design-quick")
    assert len(rows) == len(STUDIES["weight-design"].points(True))
    for r in rows:
        top_k = r["workload_moe_top_k"]
        assert (r["messages_weight_request"] == 0) == (r["weight_bits"] >= top_k + 1), r["run_id"]


def test_switch_partial_free_sends_no_synchronisation(evaluated):
    out, _ = evaluated
    by = {r["reclaim"]: r for r in _rows(out, "switch-quick")}
    assert by["partial-free"]["sync_messages"] == 0 < by["refcount-gated"]["sync_messages"]
    assert by["partial-free"]["use_after_free"] == by["refcount-gated"]["use_after_free"] == 0


def test_a_second_run_reuses_every_point(evaluated, capsys):
    out, argv = evaluated
    assert main(argv) == 0
    data = json.loads((out / "evaluation.json").read_text())
    assert all(s["computed"] == 0 and s["reused_points"] == s["points"] > 0 for s in data["studies"])


def test_every_study_plans_quick_and_full():
    for study in (s for s in STUDIES.values() if s.runner is None):  # dse: the optimiser proposes its points
        quick, full = (plan_sweep(spec_text(study, q)) for q in (True, False))
        assert 0 < len(quick.points) <= len(full.points), study.name
        assert quick.spec.name != full.spec.name  # side by side in one directory


def test_makespan_is_greedy_list_scheduling():
    assert makespan([3, 3, 2, 2, 2], 2) == 7  # 3|3, then 2 on each (5|5), then 2 -> 7
    assert makespan([5, 1, 1, 1], 1) == 8
    assert makespan([5, 1, 1, 1], 32) == 5
    with pytest.raises(ValueError):
        makespan([1.0], 0)


def test_speculative_speedup_closed_form():
    """Leviathan et al.'s E / (c k + v) for 8 sequences at 160 tokens on sn40l, by hand: E = 1 + the
    four published rates; decode is memory-bound, so c is the bytes a draft step streams over a target
    step's (each: its layers' weights, the head whole, 8 embedding rows, the cached K and V; the 1B's
    head is its embedding), and the verify step of 5 tokens a sequence is still memory-bound (v ~ 1)."""
    e, c, v, speedup = leviathan_speedup()
    assert e == pytest.approx(1 + 0.837 + 0.685 + 0.562 + 0.460)
    ctx, n = 160 * 8, 8
    target = (8_030_261_248 - 128256 * 4096 - 65 * 4096) * 2 + n * 4096 * 2 + ctx * 131_072
    draft = (1_235_814_400 - 33 * 2048) * 2 + n * 2048 * 2 + ctx * 32_768
    assert c == pytest.approx(draft / target, rel=0.01)
    assert 1.0 <= v <= 1.02
    assert speedup == pytest.approx(e / (4 * c + v))


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "x"
    f.write_text("")
    assert main(["evaluate", "--quick", "--only", "switch", "--out", str(f)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_block_table_overhead_closed_form():
    from cluster.evaluate.studies.kv_on_chip import table_overhead

    # sn40l: 1,040 MUs of 512 KiB; 4 KiB blocks: 128 entries, each naming one of 133,120 blocks
    # (18 bits) plus a valid bit: 128 x 19 bits = 304 B
    assert "128 block-table entries a MU of 19 bits, 304 B" in table_overhead(4096)


def test_a_refused_point_is_a_finding_and_a_crash_is_not():
    from cluster.commands.evaluate import _crashed

    refused = {"point_status": "error", "point_error": "ConfigError: config: 1 problem in the config\n"
               "  workload.dataflow: partition 0 needs 547,880,960 B of MU space; the chip has 1040 MUs of 524,288 B"}
    crashed = {"point_status": "error", "point_error": "KeyError: 'mu'"}
    deadlocked = {"point_status": "ok", "status": "deadlocked"}
    why = "moe-tiling: MU 10 refused expert 2's accumulator"
    stopped = {"point_status": "error", "point_error": f"BufferRefused: {why}"}
    other = {"point_status": "error", "point_error": f"RuntimeError: {why}"}
    assert [_crashed(r) for r in (refused, crashed, deadlocked, stopped, other)] == [False, True, False, False, True]


def test_buffers_kv_share_closed_form():
    from cluster.evaluate.studies.buffers import kv_share

    # one layer of Llama-3.1-8B: 8 KV heads x 128 x 2 (K, V) x 2 B = 4 KiB a token; 8 sequences of 4,096
    # tokens: 134,217,728 B of the chip's 1,040 x 524,288 = 545,259,520 B
    assert kv_share(4096) == pytest.approx(134_217_728 / 545_259_520)
    assert kv_share(16384) == pytest.approx(0.98462, abs=1e-5)  # beyond what the MUs can hold beside the tiles


def _trial(n, tps, reserved, energy, front):
    return {"run_id": f"{n:016x}-s1", "trial": n, "feasible": True, "status": "completed", "on_front": front,
            "tokens_per_second": tps, "peak_mu_reserved": reserved, "energy_per_token_joules": energy}


def test_dse_front_check_fails_on_a_dominated_member():
    from cluster.evaluate.studies.dse import _judge

    good = [_trial(0, 10.0, 0.2, 1.0, True), _trial(1, 5.0, 0.1, 1.0, True), _trial(2, 4.0, 0.3, 2.0, False)]
    assert [c.holds for c in _judge(good)] == [True, True]
    # trial 1 flagged off the front although nothing dominates it (less memory than any other)
    missed = [dict(good[0]), dict(good[1], on_front=False), dict(good[2])]
    assert _judge(missed)[0].holds is False
    # trial 2 flagged on the front although trial 0 beats it in every objective
    dominated = [dict(good[0]), dict(good[1]), dict(good[2], on_front=True)]
    assert _judge(dominated)[0].holds is False
    # by share, a design with 1 MiB MUs at 0.10 beats 512 KiB ones at 0.15; in bytes (109 MB against 82 MB) not
    big = dict(_trial(0, 10.0, 0.10, 1.0, True), chip_mu_bytes=2**20)
    small = dict(_trial(1, 10.0, 0.15, 1.0, False), chip_mu_bytes=2**19)
    assert [c.holds for c in _judge([big, small])] == [True, False]


def _layer(policy, context, status="completed", util=None, reserved=0.5, spill="none"):
    return {"run_id": f"{policy}-{context}", "point_status": "ok", "status": status, "policy": policy,
            "memory_spill": spill, "workload_dataflow_graph_serve-step_kv_read": 8 * context,
            "peak_mu_utilization": util, "peak_mu_reserved": reserved}


def test_buffers_a_completed_run_holds_the_kv_only_with_its_bytes_live():
    from cluster.evaluate.studies.buffers import STUDY, held

    # 8 x 16,384 tokens x 4 KiB = 98.5 % of the MUs: a run that completes at 3 % live read its KV from HBM
    assert not held(_layer("static-multi", 16384, util=0.03))
    assert held(_layer("static-multi", 4096, util=0.2544))  # 8 x 4,096 x 4 KiB = 0.2462 of the MUs
    checks = {c.what: c.holds for c in STUDY.judge([_layer("static-multi", 16384, util=0.03),
                                                    _layer("virtual", 4096, util=0.26, reserved=0.28)])}
    assert checks["no policy holds 8 x 16,384 tokens on chip"]
    # a virtual buffer's blocks stay in its MU: 4,096 x 256 B = 1 MiB cannot be held in 512 KiB
    assert not checks["virtual without spill, 4,096 tokens: a buffer outgrows its MU"]

"""The reservation study end to end (in-process, --quick): its four points hold the vLLM paper's
figures (Kwon et al., SOSP 2023: Orca (Max)'s 7 batched requests, Figure 13's order and ratios,
Figure 2's token shares; cluster/evaluate/studies/reservation.py)."""

from __future__ import annotations

import json

import pyarrow.dataset as ds

from cluster.cli import main


def test_reservation_study_holds_the_vllm_papers_figures(tmp_path):
    assert main(["evaluate", "--quick", "--in-process", "--quiet", "--only", "reservation",
                 "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "evaluation.json").read_text())
    checks = data["checks"]["reservation"]
    assert len(checks) == 10 and all(c["holds"] for c in checks), [c for c in checks if not c["holds"]]
    rows = ds.dataset(tmp_path / "reservation-quick" / "run_summary", format="parquet",
                      partitioning="hive").to_table().to_pylist()
    by = {r["workload_decode_kv_reservation"]: r for r in rows}
    assert set(by) == {"paged", "exact", "pow2", "max"}
    for r in rows:  # every request served; what a sequence wrote never exceeds what it reserved
        assert r["requests_finished"] == 200 and r["kv_used_peak_bytes"] <= r["kv_reserved_peak_bytes"]
    assert by["max"]["batch_max"] == 982 // 128  # the KV room's pages over 2,048 tokens' 128 pages
    assert by["paged"]["preemptions"] > 0 and all(by[k]["preemptions"] == 0 for k in ("exact", "pow2", "max"))


def test_a_roofline_priced_serve_point_is_predicted_by_its_requests():
    """No anchor is simulated under step_roofline: the ETA's prior is its requests, not the anchors' minutes."""
    from cluster.sweep.cost import ROOFLINE_REQUEST_SECONDS, prior

    base = {"chip": {"preset": "sn40l"}, "workload": {"kind": "serve", "decode": {"requests": 400}}}
    priced = {**base, "workload": {"kind": "serve", "decode": {"requests": 400, "step_roofline": True}}}
    assert prior("run", priced) == 400 * ROOFLINE_REQUEST_SECONDS
    assert prior("run", base) > 50 * prior("run", priced)  # the anchors: 222 s

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

"""The moe-tiling study end to end (in-process, --quick): each MU policy under STeP's dynamic tiling on the
artifact's Mixtral and Qwen3 batch-64 routing files, held to closed forms, brute force and STeP's Fig. 9
(Sohn et al., ASPLOS 2026: static tile 16 takes 1.65x dynamic tiling's cycles; cluster/evaluate/studies/
moe_tiling.py)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.dataset as ds

from cluster.cli import main
from cluster.evaluate.studies.moe_tiling import FILES, ROUTING, _judge


def test_moe_tiling_study_holds_its_closed_forms_and_fig9(tmp_path):
    assert main(["evaluate", "--quick", "--in-process", "--quiet", "--only", "moe-tiling",
                 "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "evaluation.json").read_text())
    checks = data["checks"]["moe-tiling"]
    assert all(c["holds"] for c in checks), [c for c in checks if not c["holds"]]
    assert any("Fig. 9" in c["reference"] for c in checks)
    rows = ds.dataset(tmp_path / "moe-tiling-quick" / "run_summary", format="parquet",
                      partitioning="hive").to_table().to_pylist()
    assert len(rows) == 9 and all(r["status"] == "completed" for r in rows)
    dyn = [r for r in rows if r["workload_tiling_tile"] == "dynamic"]
    for name, (_, path) in list(FILES.items())[:2]:  # Mixtral: 8 experts of 4096 x 14336; Qwen3: 128 of 2048 x 768
        mine = [r for r in dyn if r["workload_tiling_routing"].endswith(path)]
        assert {r["policy"] for r in mine} == {"virtual", "realloc-copy", "static-multi", "static-single"}
        with np.load(ROUTING / path) as f:
            routes = f["data"]
        d, ff = (4096, 14336) if name.startswith("mixtral") else (2048, 768)
        active = len(np.unique(routes))
        weights = 3 * d * ff * 2 * active  # each active expert's gate, up and down matrices, bf16, once
        b, k = routes.shape
        assert {r["hbm_read_bytes"] + r["hbm_write_bytes"] for r in mine} == {weights + b * d * 6 + b * k * 2}
        by = {r["policy"]: r for r in mine}
        assert by["virtual"]["bytes_copied"] == 0 < by["realloc-copy"]["bytes_copied"]
        # whole slots reserved: one MU a buffer > a quarter MU > grown to fit
        assert (by["static-single"]["peak_mu_reserved"] > by["static-multi"]["peak_mu_reserved"]
                > by["realloc-copy"]["peak_mu_reserved"] >= by["virtual"]["peak_mu_reserved"])


def test_a_refused_point_is_a_finding_only_where_it_cannot_fit():
    """At batch 1,024 the busiest Mixtral expert's fp32 accumulator (414 tokens x 4096 x 4 B = 6.8 MB) outgrows a
    static-multi slot (16 MiB / 4); at batch 64 (24 tokens: 393 KB) it fits, so a refusal there is no finding."""
    error = "Traceback ...\nBufferRefused: moe-tiling: MU 10 refused expert 2's accumulator"

    def refused(name: str) -> dict:
        return {"point_status": "error", "memory_policy": "static-multi", "point_error": error,
                "workload_tiling_routing": str(ROUTING / FILES[name][1])}

    copied = {"status": "completed", "policy": "realloc-copy", "bytes_copied": 1, "run_id": "r",
              "workload_tiling_routing": str(ROUTING / FILES["mixtral_b64"][1])}
    checks = {c.what.split(":")[0]: c for c in _judge([refused("mixtral_b1024"), refused("mixtral_b64"), copied])}
    big = checks["mixtral_b1024 static-multi"]
    assert big.holds and "6,782,976 B" in big.reference
    assert not checks["mixtral_b64 static-multi"].holds
    assert not checks["mixtral_b64 realloc-copy"].holds  # 1 B is not what the tiles' growth copies

"""rdasim run with preemption and serving metrics: bad input, the run_requests table, the JSON keys."""

import json

import pytest

from cluster.cli import main
from cluster.results.reading import read_table
from cluster.results.schemas import RUN_REQUESTS, SERVING_COLUMNS
from tests.paths import EXAMPLES

KV = [str(EXAMPLES / "kv_decode.toml"), "--quiet", "--set", "chip.rows=4", "--set", "chip.cols=8",
      "--set", "workload.decode.requests=3", "--set", "workload.decode.max_batch=3",
      "--set", "workload.decode.prompt_tokens.min=16", "--set", "workload.decode.prompt_tokens.max=40",
      "--set", "workload.decode.output_tokens.min=4", "--set", "workload.decode.output_tokens.max=20"]


@pytest.mark.parametrize("extra,needle", [
    (["memory.on_oom=preempt", "memory.admit_watermark=1.0"], "--set memory.admit_watermark=1.0: 1 is outside [0, 1)"),
    (["memory.admit_watermark=-0.5"], "memory.admit_watermark"),
    (["memory.preempt_mode=swap"], "--set memory.preempt_mode=swap: 'swap' needs on_oom = \"preempt\""),
    (["workload.decode.slo_ttft=0.2"], "--set workload.decode.slo_ttft=0.2: 0.2 has no unit"),
    (["workload.decode.slo_tbt='20'"], "workload.decode.slo_tbt"),
])
def test_bad_input_exits_2_naming_the_key(extra, needle, capsys):
    argv = ["run", *KV]
    for e in extra:
        argv += ["--set", e]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


@pytest.mark.parametrize("example,extra,needle", [
    ("moe_mixtral.toml", "memory.on_oom=preempt",
     "preempt: moe cannot preempt; the workloads that can are kv-decode, serve, serve-system, spec-decode"),
    ("race.toml", "memory.admit_watermark=0.1", "race admits no requests"),
])
def test_preemption_and_admission_are_refused_where_nothing_is_admitted(example, extra, needle, capsys):
    assert main(["run", str(EXAMPLES / example), "--quiet", "--set", extra]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_a_decode_run_writes_run_requests_and_prints_the_serving_figures(tmp_path, capsys):
    argv = ["run", *KV, "--set", "memory.on_oom=preempt", "--set", "memory.preempt_mode=swap",
            "--set", "workload.decode.slo_ttft=\"50us\"", "--set", "workload.decode.slo_tbt=\"1us\"",
            "--json", "--out", str(tmp_path)]
    assert main(argv) == 0
    s = json.loads(capsys.readouterr().out)
    for c in SERVING_COLUMNS:
        assert c.name in s
    assert s["requests_finished"] == 3 and s["preempt_mode"] == "swap" and s["slo_ttft_seconds"] == pytest.approx(50e-6)
    t = read_table(tmp_path, "run_requests")
    assert t.schema.names[:len(RUN_REQUESTS.columns)] == [c.name for c in RUN_REQUESTS.columns]
    assert t.num_rows == 3 and sum(t["tokens"].to_pylist()) == s["tokens"]
    summary = read_table(tmp_path, "run_summary")
    assert summary["requests_finished"].to_pylist() == [3]

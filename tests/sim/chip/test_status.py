"""Every rdasim run says how it ended (completed, deadlocked, cut_off, failed), in --json, Parquet and the exit code."""

import json

from cluster.cli import main
from cluster.errors import EXIT_RUN_STATUS
from cluster.results.reading import read_table
from tests.paths import EXAMPLES

KV = str(EXAMPLES / "kv_decode.toml")
SMALL = ["--set", "workload.decode.requests=12", "--set", "workload.decode.output_tokens.min=4",
         "--set", "workload.decode.output_tokens.max=8", "--set", "workload.decode.prompt_tokens.min=64",
         "--set", "workload.decode.prompt_tokens.max=128"]


def _run(capsys, *args) -> tuple[int, dict, str]:
    code = main(["run", KV, "--json", "--quiet", *args])
    got = capsys.readouterr()
    return code, json.loads(got.out), got.err


def test_the_issue_s_realloc_partial_free_run_is_reported_deadlocked_with_who_waits(capsys, tmp_path):
    code, s, err = _run(capsys, "--set", "memory.policy=realloc-copy", "--set", "memory.reclaim=partial-free",
                        "--out", str(tmp_path))
    assert (s["status"], s["completed"], s["cut_off"], s["tokens"]) == ("deadlocked", False, False, 0)
    assert code == EXIT_RUN_STATUS["deadlocked"] == 4
    detail = s["status_detail"]
    # the requests it says are parked are exactly those the MUs count as stalled at the end
    stalled = json.loads((tmp_path / "run.json").read_text())["summary"]["stalled_at_end"]
    assert stalled > 0 and f"{stalled} append requests stalled out of memory at {stalled} MUs" in detail
    assert "0 of 32 sequences finished (16 started)" in detail and "nothing can free memory" in detail
    assert err.strip().splitlines()[-1] == f"deadlocked: {detail}"
    row = read_table(tmp_path, "run_summary").to_pylist()[0]
    assert (row["status"], row["status_detail"], row["cut_off"]) == ("deadlocked", detail, False)
    # the 16 started sequences hold 2 x 2 layers x 2 heads KV buffers each, all live when it stopped:
    # 128 allocations live at the end, none of them a leak (issue 20 item 5)
    assert (s["leaks"], s["live_at_end"]) == (0, 16 * 2 * 2 * 2)
    assert (row["leaks"], row["live_at_end"]) == (0, 128)


def test_a_run_stopped_at_max_cycles_is_cut_off_not_deadlocked(capsys):
    code, s, _ = _run(capsys, "--set", "memory.policy=realloc-copy", "--set", "run.max_cycles=20000")
    assert (s["status"], s["cut_off"], code) == ("cut_off", True, 5)
    assert "run.max_cycles = 20,000" in s["status_detail"]


def test_refused_requests_fail_the_run(capsys):
    code, s, _ = _run(capsys, "--set", "memory.policy=static-single", "--set", "memory.on_oom=fail", *SMALL)
    assert s["requests_failed"] > 0 and s["completed"]
    assert (s["status"], code) == ("failed", 6)
    assert s["status_detail"] == (f"{s['requests_failed']} of 12 sequences refused for lack of memory "
                                  "(memory.on_oom = fail)")


def test_a_finished_run_is_completed_and_exits_0(capsys, tmp_path):
    code, s, err = _run(capsys, *SMALL, "--out", str(tmp_path))
    assert (s["status"], s["status_detail"], code) == ("completed", "", 0)
    assert all(line.startswith("wrote ") for line in err.splitlines())
    row = read_table(tmp_path, "run_summary").to_pylist()[0]
    assert (row["status"], row["cut_off"], row["completed"]) == ("completed", False, True)
    assert (row["leaks"], row["live_at_end"]) == (0, 0)

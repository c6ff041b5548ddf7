"""MiniMalloc CSV reading/writing and ``rdasim alloc plan`` (exit codes, JSON, offsets file)."""

import csv
import json

import pytest

from allocators.dsa_csv import format_csv, parse_csv
from allocators.errors import InputError
from allocators.lifetimes import Buffer, Problem
from allocators.validate import is_valid
from cluster.cli import main
from tests.paths import TEST_DATA

# the shared reference data sits next to the repository (see benchmarks/alloc_quality.py)
CHALLENGING = TEST_DATA / "minimalloc"  # instance G, vendored (NOTICE.md)


def test_round_trip_with_alignment_and_offsets():
    problem = Problem((Buffer("x", 0, 4, 8, 4), Buffer("y", 2, 6, 3)))
    text = format_csv(problem, {"x": 0, "y": 8})
    assert text.splitlines()[0] == "id,lower,upper,size,alignment,offset"
    again, offsets = parse_csv(text)
    assert again == problem and offsets == {"x": 0, "y": 8}


@pytest.mark.parametrize("text,line,words", [
    ("", 1, "empty file"),
    ("id,lower,size\n", 1, "missing column(s) upper"),
    ("id,lower,upper,size,colour\n", 1, "unknown column(s) colour"),
    ("id,lower,upper,size\na,0,4,8\nb,2,6,-3\n", 3, "size must be positive, got -3"),
    ("id,lower,upper,size\na,0,4,8\nb,6,6,3\n", 3, "upper (6) must be greater than lower (6)"),
    ("id,lower,upper,size\na,0,x,8\n", 2, "column 'upper': expected an integer, got 'x'"),
    ("id,lower,upper,size\na,0,4,8\na,1,5,2\n", 3, "duplicate id 'a' (first on line 2)"),
    ("id,lower,upper,size\na,0,4\n", 2, "expected 4 fields, found 3"),
    ("id,lower,upper,size,alignment\na,0,4,8,0\n", 2, "alignment must be positive"),
])
def test_bad_files_name_the_line(text, line, words):
    with pytest.raises(InputError) as err:
        parse_csv(text)
    assert err.value.line == line and words in str(err.value) and str(err.value).startswith(f"line {line}:")


def _write(tmp_path, text):
    path = tmp_path / "in.csv"
    path.write_text(text)
    return str(path)


def test_plan_json_and_offsets_file(tmp_path, capsys):
    src = _write(tmp_path, "id,lower,upper,size\na,0,10,4\nb,5,15,4\nc,12,20,8\n")
    out = tmp_path / "out" / "offsets.csv"
    assert main(["alloc", "plan", src, "--capacity", "12", "--budget", "2s", "--out", str(out),
                 "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {k: summary[k] for k in ("peak", "lower_bound", "ratio", "proved_optimal", "valid", "method")} == {
        "peak": 12, "lower_bound": 12, "ratio": 1.0, "proved_optimal": True, "valid": True, "method": "exact"}
    assert isinstance(summary["seconds"], float)
    problem, offsets = parse_csv(out.read_text())
    assert is_valid(problem, offsets, capacity=12)


def test_plan_exits_2_with_the_line_of_a_bad_file(tmp_path, capsys):
    src = _write(tmp_path, "id,lower,upper,size\na,0,10,4\nb,9,3,4\n")
    assert main(["alloc", "plan", src]) == 2
    err = capsys.readouterr().err
    assert "line 3" in err and "upper (3) must be greater than lower (9)" in err and "Traceback" not in err


@pytest.mark.parametrize("args,words", [
    (["alloc", "plan", "/no/such.csv"], "no such file"),
    (["alloc", "plan", "FILE", "--capacity", "lots"], "--capacity"),
    (["alloc", "plan", "FILE", "--budget", "-1"], "--budget"),
    (["alloc", "plan", "FILE", "--method", "magic"], "invalid choice"),
    (["alloc"], "give an action"),
])
def test_bad_options_exit_2(tmp_path, capsys, args, words):
    src = _write(tmp_path, "id,lower,upper,size\na,0,10,4\n")
    assert main([src if a == "FILE" else a for a in args]) == 2
    assert words in capsys.readouterr().err


def test_a_capacity_below_the_lower_bound_exits_7_and_says_so(tmp_path, capsys):
    src = _write(tmp_path, "id,lower,upper,size\na,0,10,4\nb,5,15,4\n")
    assert main(["alloc", "plan", src, "--capacity", "7", "--method", "greedy"]) == 7
    captured = capsys.readouterr()
    assert "does not fit: peak 8 B > capacity 7 B" in captured.err and "DOES NOT FIT" in captured.out


def test_exact_packs_a_challenging_instance_into_one_mebibyte(capsys):
    assert main(["alloc", "plan", str(CHALLENGING / "G.1048576.csv"), "--capacity", "1MiB",
                 "--budget", "30", "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["peak"] == 1048576 == summary["lower_bound"] and summary["proved_optimal"] and summary["valid"]


def test_sizes_too_large_for_the_exact_search_are_refused_clearly(tmp_path, capsys):
    rows = "".join(f"b{i},{i},{i + 2},{10 ** 17}\n" for i in range(100))
    src = _write(tmp_path, "id,lower,upper,size\n" + rows)
    assert main(["alloc", "plan", src, "--quiet"]) == 2
    assert "too large for the exact search" in capsys.readouterr().err
    assert main(["alloc", "plan", src, "--method", "greedy", "--quiet"]) == 0


TRACE = """op,memory,id,size,top_down
cb,L1,,4096,
alloc,L1,a,65536,
alloc,L1,b,32768,false
free,L1,a,,
alloc,DRAM,w,1000,
"""
MEMORIES = ["--memory", "L1=l1:4:256KiB:16:16KiB", "--memory", "DRAM=dram:2:1MiB"]


def test_report_replays_a_trace_and_writes_the_three_reports(tmp_path, capsys):
    src = tmp_path / "trace.csv"
    src.write_text(TRACE)
    assert main(["alloc", "report", str(src), *MEMORIES, "--out", str(tmp_path / "rep")]) == 0
    with open(tmp_path / "rep" / "detailed_memory_usage.csv") as f:
        rows = [(r["memory"], int(r["address"]), int(r["size"]), r["use"]) for r in csv.DictReader(f)]
    assert rows == [("L1", 0, 16384, "reserved"), ("L1", 16384, 4096, "circular_buffer"),
                    ("L1", 20480, 32768, "buffer"), ("L1", 53248, 208896, "free"),
                    ("DRAM", 0, 1024, "buffer"), ("DRAM", 1024, 1047552, "free")]
    with open(tmp_path / "rep" / "l1_usage_summary.csv") as f:
        (l1,) = list(csv.DictReader(f))
    assert int(l1["largest_interleaved_buffer"]) == 4 * 208896


def test_report_stops_at_the_failing_step_and_says_why(tmp_path, capsys):
    src = tmp_path / "trace.csv"
    src.write_text(TRACE + "alloc,L1,big,300000,\n")
    assert main(["alloc", "report", str(src), *MEMORIES, "--out", str(tmp_path / "rep")]) == 7
    err = capsys.readouterr().err
    assert "line 7: alloc failed: out of memory" in err and "largest free block 208896 B" in err


@pytest.mark.parametrize("body,words", [
    ("op,memory,id\n", "line 1: missing column(s) size"),
    ("op,memory,id,size\nmalloc,L1,a,8\n", "line 2: unknown op 'malloc'"),
    ("op,memory,id,size\nalloc,HBM,a,8\n", "line 2: unknown memory 'HBM'"),
    ("op,memory,id,size\nalloc,L1,a,-8\n", "line 2: size must be positive"),
    ("op,memory,id,size\nfree,L1,a,\n", "line 2: free of 'a', which is not allocated"),
    ("op,memory,id,size\nalloc,L1,a,8\nfree,DRAM,a,\n", "line 3: buffer 'a' was allocated in L1, not DRAM"),
])
def test_report_rejects_bad_traces_with_the_line(tmp_path, capsys, body, words):
    src = tmp_path / "trace.csv"
    src.write_text(body)
    assert main(["alloc", "report", str(src), *MEMORIES, "--out", str(tmp_path / "rep")]) == 2
    assert words in capsys.readouterr().err


def test_report_rejects_a_bad_memory_declaration(tmp_path, capsys):
    src = tmp_path / "trace.csv"
    src.write_text(TRACE)
    assert main(["alloc", "report", str(src), "--memory", "L1=hbm:4:1MiB", "--out", str(tmp_path)]) == 2
    assert "kind 'hbm'" in capsys.readouterr().err

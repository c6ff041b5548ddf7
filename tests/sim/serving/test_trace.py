"""Request traces: a hand-made trace gives exactly its arrivals and lengths, in every format."""

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from sim.serving.trace import TraceError, parse_timestamp, take
from sim.serving.trace_window import read_requests, read_window
from tests.paths import ROOT
from tests.sim.chip.chiprun import run

# arrivals 0, 1.5, 1.5001, 4 and 10 s after the first; (prompt, output) per request
AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,20,3
2023-11-16 18:15:48.1805900,30,2
2023-11-16 18:15:48.1806900,25,4
2023-11-16 18:15:50.6805900,90,6
2023-11-16 18:15:56.6805900,40,1
"""
SECONDS = [0.0, 1.5, 1.5001, 4.0, 10.0]
PROMPT, OUTPUT = [20, 30, 25, 90, 40], [3, 2, 4, 6, 1]


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_azure_csv_gives_exactly_its_arrivals_and_lengths(tmp_path):
    rows = read_requests(_write(tmp_path, "t.csv", AZURE))
    t0 = parse_timestamp("2023-11-16 18:15:46.6805900")
    assert rows.t_ns == tuple(t0 + round(s * 1e9) for s in SECONDS)
    assert rows.prompt == tuple(PROMPT) and rows.output == tuple(OUTPUT)
    # 1 GHz, sped up 1,000 times: a second of trace is a million cycles
    t = take(read_window(tmp_path / "t.csv"), 1e9, speedup=1000.0)
    assert t.arrivals == (0, 1_500_000, 1_500_100, 4_000_000, 10_000_000) and t.before == 0
    assert t.arrival_rate == pytest.approx(4 / 0.01)


def test_window_limit_speedup_and_caps_are_applied_and_counted(tmp_path):
    path = _write(tmp_path, "t.csv", AZURE)
    t = take(read_window(path, start=1.0, duration=3.5), 1e9, speedup=2.0)  # [1, 4.5) s: requests 1, 2, 3
    assert (t.before, t.arrivals, t.prompt) == (1, (0, 50_000, 1_250_000_000), (30, 25, 90))
    t = take(read_window(path, start=1.0, limit=2), 2e9, max_prompt=28, max_output=3)
    assert t.arrivals == (0, 200_000) and t.before == 1
    assert t.prompt == (28, 25) and t.output == (2, 3) and (t.capped_prompts, t.capped_outputs) == (1, 1)
    t = take(read_window(path), 1e9, max_prompt=28, max_output=3)
    assert (t.capped_prompts, t.capped_outputs) == (3, 2) and max(t.prompt) == 28 and max(t.output) == 3
    with pytest.raises(TraceError, match="holds no request"):
        read_window(path, start=11.0)


def test_plain_csv_and_parquet_read_the_same(tmp_path):
    want = read_requests(_write(tmp_path, "a.csv", AZURE))
    rel = [t - want.t_ns[0] for t in want.t_ns]
    seconds = "timestamp,contexttokens,generatedtokens,user\n" + "".join(
        f"{s!r},{p},{o},x\n" for s, p, o in zip(SECONDS, PROMPT, OUTPUT))
    plain = read_requests(_write(tmp_path, "b.csv", seconds))
    assert list(plain.t_ns) == rel and plain.prompt == want.prompt
    azure_text = [line.split(",")[0] for line in AZURE.splitlines()[1:]]
    for ts in (pa.array(list(want.t_ns), pa.timestamp("ns")), pa.array(SECONDS), pa.array(azure_text)):
        pq.write_table(pa.table({"TIMESTAMP": ts, "ContextTokens": PROMPT, "GeneratedTokens": OUTPUT}),
                       tmp_path / "c.parquet")
        got = read_requests(tmp_path / "c.parquet")
        assert [t - got.t_ns[0] for t in got.t_ns] == rel, ts.type
        assert got.prompt == want.prompt and got.output == want.output


def test_timestamps_with_offsets_and_without_fractions():
    base = parse_timestamp("2024-05-10 00:00:00")
    assert parse_timestamp("2024-05-10 00:00:00.009930+00:00") == base + 9_930_000
    assert parse_timestamp("2024-05-10T01:00:00.5+01:00") == base + 500_000_000
    assert parse_timestamp("2024-05-09 23:30:00-00:30") == base
    assert parse_timestamp("2024-05-10 00:00:00Z") == base == 1_715_299_200 * 10**9
    assert parse_timestamp("12.000000001") == 12_000_000_001


def test_rows_out_of_time_order_are_refused_naming_the_line(tmp_path):
    lines = AZURE.splitlines()
    path = _write(tmp_path, "t.csv", "\n".join([lines[0], lines[3], lines[1], lines[2]]) + "\n")
    with pytest.raises(TraceError, match="t.csv: line 3: TIMESTAMP '2023-11-16 18:15:46.6805900' is earlier than "
                                         "the request before it: the trace must be in time order"):
        read_requests(path)
    assert read_window(path, limit=1).rows.prompt == (25,)  # the part read is in order


@pytest.mark.parametrize("row,needle", [
    ("2023-11-16 18:15:47,12,x", "line 3: GeneratedTokens 'x' is not a whole number"),
    ("2023-11-16 18:15:47,0,4", "line 3: ContextTokens '0': a request has at least one token"),
    ("2023-11-16 18:15:47,2.5,4", "line 3: ContextTokens '2.5' is not a whole number"),
    ("yesterday,2,4", "line 3: TIMESTAMP 'yesterday' is neither seconds nor"),
    ("2023-11-16 18:15:47,2", "line 3: expected 3 fields, found 2"),
])
def test_a_bad_row_is_named_by_its_line(tmp_path, row, needle):
    text = AZURE.splitlines()[0] + "\n" + AZURE.splitlines()[1] + "\n" + row + "\n"
    with pytest.raises(TraceError, match=needle.replace("(", r"\(")):
        read_requests(_write(tmp_path, "t.csv", text))


def test_bad_files_are_refused(tmp_path):
    with pytest.raises(TraceError, match="missing column"):
        read_requests(_write(tmp_path, "t.csv", "time,tokens\n1,2\n"))
    with pytest.raises(TraceError, match="does not exist"):
        read_requests(tmp_path / "none.csv")
    pq.write_table(pa.table({"TIMESTAMP": [1.0, None], "ContextTokens": [1, 2], "GeneratedTokens": [1, 1]}),
                   tmp_path / "n.parquet")
    with pytest.raises(TraceError, match="row 2: empty value"):
        read_requests(tmp_path / "n.parquet")


def _decode(trace, **extra):
    return {"workload": {"kind": "kv-decode", "decode": {
        "trace": str(trace), "trace_speedup": 10_000.0, "requests": 0, "max_batch": 2, "layers": 1, "heads": 1,
        "head_dim": 64, "dtype_bytes": 2, **extra}}}


def test_a_run_serves_the_trace_requests_at_their_arrivals(tmp_path):
    trace = _write(tmp_path, "t.csv", AZURE)
    done = run(_decode(trace, max_prompt_tokens=80))
    s, tables, results = done.summary, done.tables, done.simulation.outcome.reports
    assert s["completed"] and s["requests"] == 5 and s["tokens"] == sum(OUTPUT)
    reqs = sorted((r for res in results for r in res.records if r.kind == "request"), key=lambda r: r.ident)
    assert [r.start for r in reqs] == [0, 150_000, 150_010, 400_000, 1_000_000]  # 1 GHz / 10,000
    assert [r.tokens for r in reqs] == OUTPUT
    # each sequence's two KV buffers end holding prompt + output - 1 tokens (the prompt of 90 cut to 80)
    prompts = [min(p, 80) for p in PROMPT]
    assert Counter(tables["buffers"]["peak_bytes"]) == Counter(
        {(p + o - 1) * 128: 2 for p, o in zip(prompts, OUTPUT)})
    assert (s["trace_requests"], s["trace_capped_prompts"], s["trace_capped_outputs"]) == (5, 1, 0)


def test_spec_decode_reads_the_same_trace(tmp_path):
    raw = _decode(_write(tmp_path, "t.csv", AZURE), requests=2)
    raw["workload"]["kind"] = "spec-decode"
    raw["workload"]["decode"].update(draft=2, accept=1.0)
    s = run(raw).summary
    assert s["completed"] and s["requests"] == 2 and s["tokens"] == sum(OUTPUT[:2])


def test_cli_names_the_key_and_the_line(tmp_path, capsys):
    bad = _write(tmp_path, "t.csv", AZURE.replace(",30,2", ",30,two"))
    assert main(["run", str(ROOT / "examples" / "kv_decode_trace.toml"), "--quiet",
                 "--set", f"workload.decode.trace={bad}", "--set", "workload.decode.trace_start=0s"]) == 2
    err = capsys.readouterr().err
    assert "workload.decode.trace" in err and "line 3: GeneratedTokens 'two'" in err and "Traceback" not in err


def test_shipped_trace_is_what_its_generator_makes(tmp_path):
    import subprocess
    import sys

    subprocess.run([sys.executable, str(ROOT / "examples" / "traces" / "make_traces.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True)
    for name in ("azure_code_sample.csv", "azure_code_pressure.csv", "moe_routing_sample.npz"):
        assert (tmp_path / name).read_bytes() == (ROOT / "examples" / "traces" / name).read_bytes()
    rows = read_requests(ROOT / "examples" / "traces" / "azure_code_sample.csv")
    assert len(rows.t_ns) == 240 and min(rows.prompt) >= 1 and max(rows.prompt) <= 8192


def test_a_trace_run_gives_one_result_for_any_shard_count(tmp_path):
    raw = _decode(_write(tmp_path, "t.csv", AZURE))
    assert run(raw).summary["result_hash"] == run(raw, shards=2, cut="cols").summary["result_hash"]


def _config_beside_its_trace(tmp_path, trace="data/t.csv"):
    """cfgs/run.toml naming its trace relative to itself, the trace at cfgs/data/t.csv."""
    (tmp_path / "cfgs" / "data").mkdir(parents=True)
    _write(tmp_path / "cfgs" / "data", "t.csv", AZURE)
    cfg = tmp_path / "cfgs" / "run.toml"
    cfg.write_text(f'[chip]\npreset = "plasticine"\n[workload]\nkind = "kv-decode"\n[workload.decode]\n'
                   f'trace = "{trace}"\ntrace_speedup = 10000.0\nrequests = 0\nmax_batch = 2\nlayers = 1\n')
    (tmp_path / "elsewhere").mkdir()
    return cfg


def test_a_config_file_names_its_trace_relative_to_itself(tmp_path, monkeypatch, capsys):
    from cluster.config import load
    from cluster.config.run import RUN_SCHEMA

    cfg = _config_beside_its_trace(tmp_path)
    monkeypatch.chdir(tmp_path / "elsewhere")  # not where the config is
    assert load(RUN_SCHEMA, cfg)["workload"]["decode"]["trace"] == str(tmp_path / "cfgs" / "data" / "t.csv")
    assert main(["run", str(cfg), "--quiet", "--json"]) == 0
    assert '"trace_requests": 5' in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)  # a relative config path: the trace's stays relative (and the config hash with it)
    assert load(RUN_SCHEMA, "cfgs/run.toml")["workload"]["decode"]["trace"] == "cfgs/data/t.csv"
    # a --set path is the command line's: taken from the working directory, as any path typed there
    got = load(RUN_SCHEMA, "cfgs/run.toml", ["workload.decode.trace=cfgs/data/t.csv"])
    assert got["workload"]["decode"]["trace"] == "cfgs/data/t.csv"
    assert main(["run", "cfgs/run.toml", "--quiet", "--set", "workload.decode.trace=cfgs/data/t.csv"]) == 0


def test_a_missing_trace_says_where_it_was_looked_for(tmp_path, monkeypatch, capsys):
    cfg = _config_beside_its_trace(tmp_path, trace="data/none.csv")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "cfgs/run.toml", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (f"workload.decode.trace: trace file 'cfgs/data/none.csv' does not exist (looked for "
            f"{tmp_path / 'cfgs' / 'data' / 'none.csv'}: a path in a config file is relative to the file") in err
    assert "Traceback" not in err and cfg.is_file()

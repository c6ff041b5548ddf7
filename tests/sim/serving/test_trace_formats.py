"""Request traces read as their publishers write them (issue 27 item 4), on the files of
tests/data/traces (NOTICE.md says where each comes from): Azure 2023 and 2024 CSV, Azure 2025
multimodal CSV (gzipped as published), Mooncake and Qwen-Bailian JSON lines, BurstGPT CSV.

Known answers are computed here from the files with the standard library, in the units each
publisher documents: Azure's TIMESTAMP a UTC date and time; Mooncake's ``timestamp`` ms since
the first request (Mooncake's FAST25-release traces, 512-token blocks); Qwen-Bailian's seconds
(its README: "timestamp": 61.114, 16 tokens per block); BurstGPT's seconds (its README:
"Timestamp: request submission time, seconds from 0:00:00 on the first day"), a row with
``Response tokens`` 0 being a failed request.
"""

import csv
import gzip
import json
from datetime import datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cluster.cli import main
from sim.serving.trace import TraceError, take
from sim.serving.trace_formats import FORMATS
from sim.serving.trace_window import read_window
from tests.paths import EXAMPLES, TEST_DATA

TRACES = TEST_DATA / "traces"
AZURE23 = TRACES / "azure2023" / "AzureLLMInferenceTrace_code.csv"
AZURE24 = TRACES / "azure2024" / "AzureLLMInferenceTrace_conv_1week.csv"
AZURE25 = TRACES / "azure2025" / "AzureLMMInferenceTrace_multimodal.csv.gz"
MOONCAKE = TRACES / "mooncake" / "mooncake_trace.jsonl"
CONVERSATION = TRACES / "mooncake" / "conversation_trace.jsonl"
QWEN = TRACES / "qwen-bailian" / "qwen_traceA_blksz_16.jsonl"
BURST = TRACES / "burstgpt" / "BurstGPT_1.csv"


def _utc_ns(text: str) -> int:
    """An Azure TIMESTAMP by datetime (fractions to microseconds: every file here has at most 7 digits,
    the 2023 ones ending in 0 or exact at 100 ns, checked below)."""
    text = text.replace("Z", "+00:00")
    head, _, frac = text.partition(".")
    frac, zone = (frac[:-6], frac[-6:]) if frac.endswith("+00:00") else (frac, "")
    base = datetime.fromisoformat(head.replace(" ", "T") + (zone or "+00:00"))
    return int(base.timestamp()) * 10**9 + int((frac or "0").ljust(9, "0"))


def _expected(path) -> tuple[list[int], list[int], list[int], list[list[int]] | None]:
    """(arrival ns, prompt, output, hash_ids) of every request the file's publisher describes."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        if path.name.endswith(".jsonl"):
            recs = [json.loads(line, parse_float=Decimal) for line in f]
            unit = 10**6 if "chat_id" not in recs[0] else 10**9  # Mooncake ms, Qwen-Bailian s
            return ([int(Decimal(r["timestamp"]) * unit) for r in recs], [r["input_length"] for r in recs],
                    [r["output_length"] for r in recs], [r["hash_ids"] for r in recs])
        rows = list(csv.DictReader(f))
    if "Timestamp" in rows[0]:  # BurstGPT: failed requests left out
        rows = [r for r in rows if r["Response tokens"] != "0"]
        return ([int(r["Timestamp"]) * 10**9 for r in rows], [int(r["Request tokens"]) for r in rows],
                [int(r["Response tokens"]) for r in rows], None)
    return ([_utc_ns(r["TIMESTAMP"]) for r in rows], [int(r["ContextTokens"]) for r in rows],
            [int(r["GeneratedTokens"]) for r in rows], None)


@pytest.mark.parametrize("path,fmt,n,span_s,failed", [
    (AZURE23, "azure", 13, Decimal("29.479069"), 0),
    (TRACES / "azure2024" / "AzureLLMInferenceTrace_code_1week.csv", "azure", 5, Decimal("0.07396"), 0),
    (AZURE24, "azure", 5, Decimal("0.247116"), 0),
    (AZURE25, "azure-multimodal", 5, Decimal("7.297"), 0),
    (MOONCAKE, "mooncake", 30, Decimal("6.109"), 0),
    (CONVERSATION, "mooncake", 12, Decimal("3"), 0),
    (QWEN, "qwen-bailian", 12, Decimal("5.93"), 0),
    (BURST, "burstgpt", 6, Decimal("166"), 2),
])
def test_each_published_format_gives_its_requests_in_the_publishers_units(path, fmt, n, span_s, failed):
    t, prompt, output, hashes = _expected(path)
    w = read_window(path)
    assert (w.format, w.failed, len(w.rows.t_ns)) == (fmt, failed, n)
    assert list(w.rows.t_ns) == t and w.rows.t_ns[-1] - w.rows.t_ns[0] == int(span_s * 10**9)
    assert list(w.rows.prompt) == prompt and list(w.rows.output) == output
    assert read_window(path, trace_format=fmt).rows == w.rows  # named, it reads the same
    if hashes is None:
        assert w.rows.blocks is None
        return
    blocks = w.rows.blocks
    assert blocks.block_tokens == FORMATS[fmt].block_tokens == (512 if fmt == "mooncake" else 16)
    for i, h in enumerate(hashes):  # the i-th blocks of two requests are one exactly when their ids agree up to i
        assert len(blocks.of(i)) == len(h) == -(-prompt[i] // blocks.block_tokens)
        for k, g in enumerate(hashes[:i]):
            same = [a == b for a, b in zip(blocks.of(i), blocks.of(k))]
            agree = [h[:j + 1] == g[:j + 1] for j in range(min(len(h), len(g)))]
            assert same == agree


def test_windows_limits_speedup_and_caps_work_on_every_format():
    # Mooncake: ten requests at 0 ms, two at 3,000 ms
    w = read_window(CONVERSATION, start=1.0)
    assert (w.before, len(w.rows.t_ns), w.rows.prompt) == (10, 2, (13544, 6324))
    a, b = w.rows.blocks.of(0), w.rows.blocks.of(1)  # both begin with hash id 0, then differ
    assert (len(a), len(b), a[0] == b[0], a[1] == b[1]) == (27, 13, True, False)
    t = take(read_window(CONVERSATION, limit=11), 1e9, speedup=1000.0, max_prompt=8192, max_output=400)
    assert t.arrivals == (0,) * 10 + (3_000_000,) and (t.capped_prompts, t.capped_outputs) == (5, 7)
    # Qwen-Bailian: [1, 3) s after the first arrival holds chats 3, 4 and 5
    w = read_window(QWEN, start=1.0, duration=2.0)
    assert (w.before, [int(x) for x in w.rows.t_ns]) == (3, [1_371_000_000, 2_036_000_000, 2_510_000_000])
    assert take(w, 2e9, speedup=2.0).arrivals == (0, 665_000_000, 1_139_000_000)
    # Azure 2025: the first two seconds hold one request
    assert len(read_window(AZURE25, duration=2.0).rows.t_ns) == 1


def test_burstgpt_failed_rows_are_skipped_and_counted_and_a_model_may_be_kept():
    w = read_window(BURST, start=40.0, duration=90.0)  # [45, 135) s: 45 and 118 served, 120 and 131 failed
    assert (w.before, w.rows.prompt, w.failed) == (1, (1087, 417), 2)
    w = read_window(BURST, model="GPT-4")  # 118, 131 (failed) and 171 s
    assert (w.rows.prompt, w.failed, w.rows.t_ns[1] - w.rows.t_ns[0]) == ((417, 1510), 1, 53 * 10**9)
    w = read_window(BURST, start=10.0, model="GPT-4", limit=1)  # the window starts at GPT-4's first arrival
    assert (w.before, w.rows.prompt, w.failed) == (1, (1510,), 1)
    with pytest.raises(TraceError, match="holds no request of Model 'ChatGPT' \\(1 failed, skipped\\)"):
        read_window(BURST, start=114.0, duration=8.0, model="ChatGPT")
    with pytest.raises(TraceError, match="no requests of Model 'GPT-5'"):
        read_window(BURST, model="GPT-5")
    with pytest.raises(TraceError, match="trace_model 'GPT-4': the mooncake format names no model"):
        read_window(MOONCAKE, model="GPT-4")


def test_the_multimodal_trace_says_once_that_images_are_ignored(tmp_path):
    plain = tmp_path / "AzureLMMInferenceTrace_multimodal.csv"
    plain.write_bytes(gzip.decompress(AZURE25.read_bytes()))
    w, g = read_window(plain), read_window(AZURE25)
    assert w.rows == g.rows and w.note == g.note == FORMATS["azure-multimodal"].ignored
    assert "NumImages ignored" in w.note and read_window(AZURE23).note == ""


def test_a_parquet_of_a_format_reads_as_its_json_lines(tmp_path):
    recs = [json.loads(line) for line in MOONCAKE.read_text().splitlines()]
    table = pa.table({k: [r[k] for r in recs] for k in ("timestamp", "input_length", "output_length", "hash_ids")})
    pq.write_table(table, tmp_path / "mooncake.parquet", row_group_size=8)  # as the Hugging Face copies hold it
    got, want = read_window(tmp_path / "mooncake.parquet", start=3.0), read_window(MOONCAKE, start=3.0)
    assert (got.format, got.before, got.rows.t_ns, got.rows.prompt) == ("mooncake", 9, want.rows.t_ns,
                                                                        want.rows.prompt)
    assert [list(got.rows.blocks.of(i)) for i in range(len(got.rows.t_ns))] == \
        [list(want.rows.blocks.of(i)) for i in range(len(want.rows.t_ns))]


@pytest.mark.parametrize("name,text,needle", [
    ("mooncake_trace.jsonl", '{"timestamp": 0, "input_length": 6, "output_length": 1}\n{"timestamp": 5, "input_'
     'length": 6 "output_length": 1}\n', r"mooncake_trace.jsonl: line 2: column 36: not JSON \(Expecting ','"),
    ("mooncake_trace.jsonl", '{"timestamp": 0, "input_length": 6, "output_length": 1}\n{"timestamp": 5, '
     '"input_length": 6}\n', r"line 2: no key 'output_length' \(mooncake: timestamp, input_length, output_length"),
    ("mooncake_trace.jsonl", '{"timestamp": 0, "input_length": 6, "output_length": 1}\n{"timestamp": 5, '
     '"input_length": "six", "output_length": 1}\n', "line 2: input_length 'six' is not a whole number"),
    ("mooncake_trace.jsonl", '{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [0, "a"]}\n',
     "line 1: hash_ids holds 'a', not a whole number"),
    ("mooncake_trace.jsonl", '{"timestamp": 9, "input_length": 6, "output_length": 1}\n{"timestamp": 5, '
     '"input_length": 6, "output_length": 1}\n', "line 2: timestamp 5 is earlier than the request before it"),
    ("qwen_traceA_blksz_16.jsonl", '{"chat_id": 0, "parent_chat_id": -1, "timestamp": "soon", "input_length": 1, '
     '"output_length": 1, "type": "text", "turn": 1, "hash_ids": [0]}\n',
     "line 1: timestamp 'soon' is not a number of seconds"),
    ("t.jsonl", '[1, 2]\n', "t.jsonl: line 1: not a JSON object"),
    ("t.jsonl", '{"time": 1}\n', "t.jsonl: line 1: missing column.*time are the columns of no request-trace "
     "format .*formats: azure \\(csv: TIMESTAMP, ContextTokens, GeneratedTokens\\); azure-multimodal"),
    ("BurstGPT_1.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,0,18,18,"
     "API log\n", "BurstGPT_1.csv: line 2: Request tokens '0': a request has at least one token"),
    ("BurstGPT_1.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\nfive,ChatGPT,4,18,22,"
     "API log\n", "line 2: Timestamp 'five' is not a number of seconds"),
    ("t.csv", "", "t.csv: line 1: empty file: expected a header; formats: azure"),
])
def test_a_bad_file_is_named_with_its_line_and_column(tmp_path, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError, match=needle):
        read_window(path)


def test_a_named_format_the_file_is_not_says_what_it_lacks():
    with pytest.raises(TraceError, match=r"AzureLLMInferenceTrace_code.csv: line 1: missing column\(s\) Request "
                                         r"tokens, Response tokens: not the burstgpt format \(csv: Timestamp, Model"):
        read_window(AZURE23, trace_format="burstgpt")
    with pytest.raises(TraceError, match=r"line 1: missing column\(s\) chat_id, parent_chat_id, turn: not the "
                                         r"qwen-bailian format"):
        read_window(MOONCAKE, trace_format="qwen-bailian")


def test_json_lines_are_read_only_to_the_first_request_past_the_window(tmp_path):
    lines = CONVERSATION.read_text().splitlines()
    path = tmp_path / "conversation_trace.jsonl"
    path.write_text("\n".join(lines[:11] + ["not json"] + lines[11:]) + "\n")  # after the first at 3,000 ms
    assert len(read_window(path, duration=1.0).rows.t_ns) == 10  # stops at line 11, past the window
    assert len(read_window(path, limit=11).rows.t_ns) == 11
    with pytest.raises(TraceError, match="line 12: column 1: not JSON"):
        read_window(path)


def _run(trace, *extra):
    return main(["run", str(EXAMPLES / "kv_decode_trace.toml"), "--quiet", "--set", f"workload.decode.trace={trace}",
                 "--set", "workload.decode.trace_start=0s", "--set", "workload.decode.trace_duration=0s",
                 "--set", "workload.decode.requests=0", "--set", "workload.decode.max_prompt_tokens=512",
                 "--set", "workload.decode.max_output_tokens=16", *extra])


@pytest.mark.parametrize("path,fmt", [(AZURE25, "azure-multimodal"), (BURST, "burstgpt"), (QWEN, "qwen-bailian")])
def test_rdasim_run_serves_a_published_file_as_it_is(path, fmt, capsys):
    assert _run(path) == 0
    out = capsys.readouterr().out
    assert f"trace ({fmt}):" in out and "status completed" in out
    assert out.count("NumImages ignored") == (fmt == "azure-multimodal")
    assert ("2 failed rows skipped" in out) == (fmt == "burstgpt")


def test_a_bad_trace_is_one_error_naming_the_key_and_the_line(tmp_path, capsys):
    bad = tmp_path / "BurstGPT_1.csv"
    bad.write_text(BURST.read_text().replace("1087,230", "1087,lots"))
    assert _run(bad) == 2
    err = capsys.readouterr().err
    assert "workload.decode.trace: " in err and "line 3: Response tokens 'lots' is not a whole number" in err
    assert "workload.decode.requests" not in err and "Traceback" not in err  # no second, spurious error
    assert _run(BURST, "--set", "workload.decode.trace_format=mooncake") == 2
    assert "missing column(s) input_length, output_length: not the mooncake format" in capsys.readouterr().err


def test_a_file_missing_one_column_of_a_format_names_that_column(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n")
    with pytest.raises(TraceError, match=r"short.csv: line 1: missing column\(s\) GeneratedTokens of the azure format"):
        read_window(path)


def test_the_public_azure_conversation_hour_reads_whole():
    """The 2023 conversation trace as published (CRLF, no final newline): its 19,366 requests from
    the first row (18:15:46.68, 374 tokens in, 44 out) to the last (19:14:08.40, 197 in, 183 out),
    with the medians Splitwise (Patel et al., ISCA 2024) reports for it: 1,020 prompt and 129 output
    tokens; the longest prompt 14,050 tokens, uncapped."""
    import hashlib

    path = TRACES / "azure2023-hour" / "AzureLLMInferenceTrace_conv.csv"
    data = path.read_bytes()
    assert len(data) == 719_188 and data.count(b"\r\n") == 19_366 and not data.endswith(b"\n")
    assert hashlib.sha256(data).hexdigest().startswith("2f1e5b66")
    rows = read_window(path).rows
    assert len(rows.t_ns) == 19_366
    assert (rows.prompt[0], rows.output[0], rows.prompt[-1], rows.output[-1]) == (374, 44, 197, 183)
    span = _utc_ns("2023-11-16 19:14:08.4025270") - _utc_ns("2023-11-16 18:15:46.6805900")
    assert rows.t_ns[-1] - rows.t_ns[0] == span
    assert (int(np.median(rows.prompt)), int(np.median(rows.output))) == (1020, 129)
    assert max(rows.prompt) == 14_050


def test_the_public_azure_code_hour_reads_whole():
    """The 2023 code trace as published (CRLF, no final newline): every one of its 8,819 requests
    (Patel et al., Splitwise, ISCA 2024: the code trace's request count), from its first row
    (18:17:03.98, 4,808 tokens in, 10 out) to its last (19:14:19.93, 549 in, 173 out), the file
    unchanged (its SHA-256 as published)."""
    import hashlib

    path = TRACES / "azure2023-hour" / "AzureLLMInferenceTrace_code.csv"
    data = path.read_bytes()
    assert len(data) == 320_117 and data.count(b"\r\n") == 8_819 and not data.endswith(b"\n")
    assert hashlib.sha256(data).hexdigest().startswith("54e9a6d2")
    w = read_window(path)
    rows = w.rows
    assert len(rows.t_ns) == 8_819
    assert (rows.prompt[0], rows.output[0], rows.prompt[-1], rows.output[-1]) == (4808, 10, 549, 173)
    span = _utc_ns("2023-11-16 19:14:19.9280160") - _utc_ns("2023-11-16 18:17:03.9799600")
    assert rows.t_ns[-1] - rows.t_ns[0] == span
    assert max(rows.prompt) == 7437  # prompts uncapped: the longest as published

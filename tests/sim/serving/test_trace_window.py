"""Reading a window of a trace, not the whole file: on files shaped exactly as the public Azure
traces (their header, the 2023 and the 2024 timestamp text, the Parquet a conversion gives),
every window equals the brute-force cut of the whole file, and the reader provably stops past
the window and skips what lies before it."""

from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from sim.serving.trace import COLUMNS, TraceError
from sim.serving.trace_window import read_requests, read_window

N = 600
T0 = 1_715_299_200 * 10**9  # 2024-05-10 00:00:00 UTC


def _requests(step_ns: int, seed: int = 7) -> tuple[list[int], list[int], list[int]]:
    """N arrivals in time order (gaps 0-2 s, some ties, multiples of ``step_ns``) and lengths."""
    rng = np.random.default_rng(seed)
    gaps = rng.integers(0, 2 * 10**9 // step_ns, N) * step_ns
    gaps[rng.random(N) < 0.05] = 0  # ties: taken in file order
    gaps[0] = 0
    t = (T0 + np.cumsum(gaps)).tolist()
    return t, rng.integers(1, 9000, N).tolist(), rng.integers(1, 900, N).tolist()


def _stamp_2023(t: int) -> str:  # AzureLLMInferenceTrace_code.csv: 2023-11-16 18:15:46.6805900
    sec, ns = divmod(t, 10**9)
    return f"{datetime.fromtimestamp(sec, tz=timezone.utc):%Y-%m-%d %H:%M:%S}.{ns // 100:07d}"


def _stamp_2024(t: int) -> str:  # AzureLLMInferenceTrace_code_1week.csv: 2024-05-10 00:00:00.009930+00:00
    sec, ns = divmod(t, 10**9)
    frac = f".{ns // 1000:06d}" if ns else ""  # a whole second is written without a fraction
    return f"{datetime.fromtimestamp(sec, tz=timezone.utc):%Y-%m-%d %H:%M:%S}{frac}+00:00"


def _csv_text(stamps: list[str], prompt: list[int], output: list[int]) -> str:
    return ",".join(COLUMNS) + "\n" + "".join(f"{s},{p},{o}\n" for s, p, o in zip(stamps, prompt, output))


def _public_files(tmp_path, year: int) -> tuple[list, tuple[list[int], list[int], list[int]]]:
    """The trace as the public CSV, the Parquet the docs' conversion makes of it (a timestamp
    column, a row group per 4 KiB block) and a Parquet keeping the text (row groups of 64)."""
    step, stamp = (100, _stamp_2023) if year == 2023 else (1000, _stamp_2024)
    reqs = _requests(step)
    whole = -(-reqs[0][5] // 10**9) * 10**9  # one arrival on a whole second
    reqs[0][5:] = [max(t, whole) for t in reqs[0][5:]]
    stamps = [stamp(t) for t in reqs[0]]
    csv_path = tmp_path / f"AzureLLMInferenceTrace_code_{year}.csv"
    csv_path.write_text(_csv_text(stamps, *reqs[1:]))
    blocks = pacsv.open_csv(csv_path, read_options=pacsv.ReadOptions(block_size=4096))  # docs/traces.md's conversion
    assert pa.types.is_timestamp(blocks.schema.field("TIMESTAMP").type)
    with pq.ParquetWriter(tmp_path / f"converted_{year}.parquet", blocks.schema) as out:
        for batch in blocks:
            out.write_batch(batch)  # a row group per block of the CSV
    assert pq.ParquetFile(tmp_path / f"converted_{year}.parquet").metadata.num_row_groups > 4
    text = pa.table({"TIMESTAMP": stamps, "ContextTokens": reqs[1], "GeneratedTokens": reqs[2]})
    pq.write_table(text, tmp_path / f"text_{year}.parquet", row_group_size=64)
    return [csv_path, tmp_path / f"converted_{year}.parquet", tmp_path / f"text_{year}.parquet"], reqs


def _brute(reqs, start: float, duration: float, limit: int):
    """The window cut from the whole list: [first + start, first + start + duration)."""
    t = reqs[0]
    lo = t[0] + round(start * 1e9)
    idx = [i for i, x in enumerate(t) if x >= lo and (duration <= 0 or x < lo + round(duration * 1e9))]
    idx = idx[:limit] if limit else idx
    return tuple(t[i] for i in idx), tuple(reqs[1][i] for i in idx), tuple(reqs[2][i] for i in idx), \
        sum(1 for x in t if x < lo)


WINDOWS = [  # (start, duration) as fractions of the trace's span, limit: at the start, middle, end, limited
    (0.0, 0.0, 0), (0.0, 0.03, 0), (0.0, 0.0, 7), (0.4, 0.05, 0), (0.4, 0.0, 40), (0.4, 0.1, 5),
    (0.98, 0.0, 0), (0.98, 0.5, 3), (1.0, 0.0, 0), (0.0, 0.0, N),
]


@pytest.mark.parametrize("year", [2023, 2024])
def test_every_window_of_a_public_shaped_trace_is_the_brute_force_cut(tmp_path, year):
    files, reqs = _public_files(tmp_path, year)
    span = (reqs[0][-1] - reqs[0][0]) / 1e9
    windows = [(a * span, d * span, n) for a, d, n in WINDOWS]
    for path in files:
        for start, duration, limit in windows:
            t_ns, prompt, output, before = _brute(reqs, start, duration, limit)
            got = read_window(path, start, duration, limit)
            assert (got.rows.t_ns, got.rows.prompt, got.rows.output, got.before) == (t_ns, prompt, output, before), \
                (path.name, start, duration, limit)
    assert read_requests(files[0]).t_ns == tuple(reqs[0])


@pytest.mark.parametrize("year", [2023, 2024])
def test_an_empty_window_is_refused_in_every_format(tmp_path, year):
    files, reqs = _public_files(tmp_path, year)
    gap = max(range(1, N), key=lambda i: reqs[0][i] - reqs[0][i - 1])  # the widest gap between arrivals
    start = (reqs[0][gap - 1] - reqs[0][0]) / 1e9 + 1e-6  # just after the request before it
    for path in files:
        for s, d in ((start, 1e-6), (1e6, 0.0)):
            with pytest.raises(TraceError, match="holds no request"):
                read_window(path, s, d)


def test_a_csv_is_read_only_to_the_first_request_past_the_window(tmp_path):
    t, p, o = _requests(100)
    lines = _csv_text([_stamp_2023(x) for x in t], p, o).splitlines()
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines[:102] + ["not,a,request"] + lines[102:]) + "\n")  # after request 101
    got = read_window(path, 0.0, (t[100] - t[0]) / 1e9)  # request 101 is the first past the window
    assert got.rows.t_ns == tuple(x for x in t[:100] if x < t[100]) and got.rows.prompt[:5] == tuple(p[:5])
    assert read_window(path, limit=101).rows.t_ns == tuple(t[:101])
    with pytest.raises(TraceError, match="line 103: TIMESTAMP 'not' is neither seconds"):
        read_window(path, limit=102)


def test_parquet_row_groups_before_and_after_the_window_are_not_read(tmp_path):
    t, p, o = _requests(1000)
    bad = [0 if 64 <= i < 128 or i >= 256 else x for i, x in enumerate(p)]  # groups 1 and 4.. hold 0 tokens
    table = pa.table({"TIMESTAMP": pa.array(t, pa.timestamp("ns", tz="UTC")), "ContextTokens": bad,
                      "GeneratedTokens": o})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=64)
    start = (t[128] - t[0]) / 1e9  # the window is the rows of groups 2 and 3
    got = read_window(tmp_path / "t.parquet", start, (t[255] - t[128]) / 1e9 + 1e-9)
    assert got.before == 128 and got.rows.prompt == tuple(p[128:256])
    with pytest.raises(TraceError, match="row 65: ContextTokens 0: a request has at least one token"):
        read_window(tmp_path / "t.parquet")


def test_parquet_out_of_time_order_is_refused(tmp_path):
    t, p, o = _requests(1000)
    t = t[64:128] + t[:64] + t[128:]  # the second row group starts before the first ends
    pq.write_table(pa.table({"TIMESTAMP": pa.array(t, pa.timestamp("ns")), "ContextTokens": p,
                             "GeneratedTokens": o}), tmp_path / "t.parquet", row_group_size=64)
    with pytest.raises(TraceError, match=r"row group 1 \(rows 65-128\) starts before the rows above it end"):
        read_window(tmp_path / "t.parquet", start=1e3)
    pq.write_table(pa.table({"TIMESTAMP": pa.array(t, pa.timestamp("ns")), "ContextTokens": p,
                             "GeneratedTokens": o}), tmp_path / "u.parquet")  # one group: row by row
    with pytest.raises(TraceError, match="row 65: TIMESTAMP .* is earlier than the request before it"):
        read_window(tmp_path / "u.parquet")

"""Memory and time of reading one window of a full-size request trace. Prints
JSON lines.

    python benchmarks/trace_window.py                 # a 10^7-row trace, windows of 10^5 and 100
    python benchmarks/trace_window.py --rows 1000000  # a smaller file (quicker)
    python benchmarks/trace_window.py --dir DIR       # keep the generated files in DIR
    python benchmarks/trace_window.py --smoke         # 2,000 rows, two windows (the test suite)

The 2024 Azure LLM inference traces hold 16.8 M and 27.3 M requests; the target is at most
1 GiB of memory for any window of up to 10^5 requests. The benchmark writes a trace of
``--rows`` requests in the public format (the CSV header and ``2024-05-10 00:00:00.009930+00:00``
timestamps, about 45 requests a second as the 2024 conversation trace has; a Parquet file
with the timestamp column docs/traces.md's conversion gives, in row groups of 2^20 rows; and
the same requests as Mooncake JSON lines, ``timestamp`` in ms and one ``hash_ids`` id per
512-token block, the first shared by all) to a temporary directory, then reads windows at its
start, middle and end, each in a fresh process whose peak resident memory (getrusage) is its
own: the interpreter and pyarrow included, as a run would pay them.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_MIB = 1024
CHUNK = 1 << 20  # rows generated (and Parquet rows per row group) at a time
MEAN_GAP_US = 22_000  # 45 requests a second


def write_traces(rows: int, out: Path, tail: int, seed: int = 21) -> tuple[Path, Path, Path, float, float]:
    """A CSV, a Parquet and a Mooncake JSON-lines trace of ``rows`` requests in the public formats;
    its span and the arrival of the ``tail``-th request from the end, in seconds after the first."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    csv_path, pq_path = out / "AzureLLMInferenceTrace_conv_1week.csv", out / "AzureLLMInferenceTrace_conv_1week.parquet"
    t_us = np.int64(1_715_299_200_000_000)  # 2024-05-10 00:00:00 UTC
    first = mark = t_us
    ts_type = pa.timestamp("ns", tz="UTC")  # what pyarrow.csv.read_csv makes of the 2024 text
    jsonl_path, next_id = out / "mooncake_trace.jsonl", 1
    with open(csv_path, "wb") as f, open(jsonl_path, "w") as js, pq.ParquetWriter(pq_path, pa.schema([
            ("TIMESTAMP", ts_type), ("ContextTokens", pa.int64()), ("GeneratedTokens", pa.int64())])) as pw:
        f.write(b"TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for lo in range(0, rows, CHUNK):
            n = min(CHUNK, rows - lo)
            t = t_us + np.cumsum(rng.exponential(MEAN_GAP_US, n).astype(np.int64))
            first = t[0] if lo == 0 else first
            t_us = t[-1]
            if lo <= rows - tail < lo + n:
                mark = t[rows - tail - lo]
            prompt = rng.lognormal(np.log(1020), 1.0, n).astype(np.int64).clip(1, 32_000)
            output = rng.lognormal(np.log(130), 1.0, n).astype(np.int64).clip(1, 4_000)
            text = np.char.add(np.char.replace(np.datetime_as_string(t.astype("datetime64[us]"), unit="us"), "T", " "),
                               "+00:00")
            pacsv.write_csv(pa.table({"TIMESTAMP": text, "ContextTokens": prompt, "GeneratedTokens": output}), f,
                            pacsv.WriteOptions(include_header=False, quoting_style="none"))
            pw.write_table(pa.table({"TIMESTAMP": pa.array(t * 1000, pa.int64()).cast(ts_type),
                                     "ContextTokens": prompt, "GeneratedTokens": output}), row_group_size=CHUNK)
            lines = []
            for ms, p, o in zip(((t - first) // 1000).tolist(), prompt.tolist(), output.tolist()):
                k = -(-p // 512)
                lines.append(f'{{"timestamp": {ms}, "input_length": {p}, "output_length": {o}, "hash_ids": '
                             f'{[0] + list(range(next_id, next_id + k - 1))}}}\n')
                next_id += k - 1
            js.write("".join(lines))
    return csv_path, pq_path, jsonl_path, float(t_us - first) / 1e6, float(mark - first) / 1e6


def measure(path: str, start: float, duration: float, limit: int) -> dict:
    """In this process: read the window; its requests, seconds and this process's peak memory."""
    from sim.serving.trace_window import read_window

    t = time.perf_counter()
    w = read_window(path, start, duration, limit)
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"requests": len(w.rows.t_ns), "before": w.before, "seconds": round(seconds, 2),
            "peak_rss_mib": round(peak, 1)}


def _child(*args: str) -> str:
    return subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True,
                          cwd=ROOT).stdout


# the shapes of the JSON lines (tests/test_benchmarks.py runs --smoke and checks them)
SMOKE_KEYS = (("bench", "generated_rows", "span_seconds", "csv_mib", "parquet_mib"),
              ("bench", "format", "rows", "window", "peak_rss_mib", "target_peak_rss_mib", "within_target"))


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10**7, help="requests in the generated trace")
    ap.add_argument("--dir", help="write the traces here and keep them (default: a temporary directory)")
    ap.add_argument("--measure", nargs=4, metavar=("PATH", "START", "DURATION", "LIMIT"), help=argparse.SUPPRESS)
    ap.add_argument("--generate", nargs=2, metavar=("DIR", "TAIL"), help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="2,000 rows; the first window and 60 s from the middle")
    args = ap.parse_args()
    if args.smoke:
        args.rows = 2000
    if args.measure:  # in a child process: its peak memory is the read's alone
        path, start, duration, limit = args.measure
        print(json.dumps(measure(path, float(start), float(duration), int(limit))))
        return
    if args.generate:  # in a child too: the parent stays small, and children inherit its peak (getrusage)
        out, tail = args.generate
        csv_path, pq_path, jsonl_path, span, last = write_traces(args.rows, Path(out), int(tail))
        print(json.dumps({"csv": str(csv_path), "parquet": str(pq_path), "jsonl": str(jsonl_path), "span": span,
                          "last": last}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.dir or tmp)
        out.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        big = min(10**5, args.rows // 2)
        made = json.loads(_child("--rows", str(args.rows), "--generate", str(out), str(big)))
        csv_path, pq_path, jsonl_path = Path(made["csv"]), Path(made["parquet"]), Path(made["jsonl"])
        span, last = made["span"], made["last"]
        print(json.dumps({"bench": "trace_window", "generated_rows": args.rows, "span_seconds": round(span),
                          "csv_mib": round(csv_path.stat().st_size / 2**20), "parquet_mib":
                          round(pq_path.stat().st_size / 2**20), "jsonl_mib": round(jsonl_path.stat().st_size / 2**20),
                          "seconds": round(time.perf_counter() - t, 1)}),
              flush=True)
        windows = {  # name: (start s, duration s, limit)
            f"first {big:,}": (0.0, 0.0, big),
            f"{big:,} from the middle": (span / 2, 0.0, big),
            f"last {big:,}": (last, 0.0, 0),
            "100 from the middle": (span / 2, 0.0, 100),
            "60 s from the middle": (span / 2, 60.0, 0),
        }
        if args.smoke:
            windows = {k: v for k, v in windows.items() if k.startswith(("first", "60 s"))}
        for path in (csv_path, pq_path, jsonl_path):
            for name, (start, duration, limit) in windows.items():
                got = json.loads(_child("--measure", str(path), repr(start), repr(duration), str(limit)))
                print(json.dumps({"bench": "trace_window", "format": path.suffix[1:], "rows": args.rows,
                                  "window": name, **got, "target_peak_rss_mib": TARGET_MIB,
                                  "within_target": got["peak_rss_mib"] <= TARGET_MIB}), flush=True)


if __name__ == "__main__":
    main()

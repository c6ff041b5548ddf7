"""Make the small traces shipped in examples/traces/ (seeded: the same bytes on every run).

    python examples/traces/make_traces.py            # rewrite the files here
    python examples/traces/make_traces.py --out DIR  # write them elsewhere

- ``azure_code_sample.csv``: 240 requests in the Azure LLM inference trace format
  (TIMESTAMP, ContextTokens, GeneratedTokens). Arrivals: a Poisson process whose rate
  switches between a calm (2 requests/s) and a busy state (10/s), each lasting an
  exponential 10 s on average, as production traces come in bursts. Lengths: lognormal,
  prompts with median 1,024 tokens (sigma 0.8, at most 8,192), outputs with median 24
  (sigma 1.0, at most 1,024): long prompts and short outputs, the shape of the published
  code-completion trace. Synthetic: no figure here is taken from the public trace.
- ``azure_code_pressure.csv``: 64 requests in the same format, over-committed as the public
  code trace's first minute is (63 requests in 60 s): steady Poisson arrivals at 1.05
  requests/s, prompts lognormal with median 2,048 tokens (sigma 0.6, at most 8,192: a few
  thousand, as code completions have), outputs as above. On examples/kv_decode_pressure.toml's
  chip its 16 running sequences want more KV than the MUs hold, so ``on_oom = "stall"``
  deadlocks (benchmarks/serving_pressure.py).
- ``moe_routing_sample.npz``: ``experts`` [4 layers, 8 steps, 64 tokens, top-2] of 8
  experts. Each layer has its own expert popularity, a Zipf law with exponent 0.4, 0.8,
  1.2 and 0.6 over a shuffled order of the experts; each token's two experts are drawn
  without replacement (Gumbel-top-k). Steps hold 40 to 64 tokens (the rest are -1,
  absent), as decode batches vary.

All are small (KBs) and drawn from numpy's PCG64 with fixed seeds; the .npz is written
with fixed zip timestamps so the bytes do not depend on when it was made.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sim.serving.trace import format_azure  # noqa: E402

HERE = Path(__file__).resolve().parent
START_NS = 1_700_000_000 * 1_000_000_000  # 2023-11-14 22:13:20 UTC


def requests(n: int = 240, seed: int = 14, rates: tuple[float, float] = (2.0, 10.0),
             prompt_median: float = 1024, prompt_sigma: float = 0.8) -> tuple[list[int], list[int], list[int]]:
    """Arrival times (ns, multiples of 100 ns as the format stores them) and lengths. The arrival
    rate (requests/s) switches between ``rates`` (equal rates: a plain Poisson process)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    t, state, switch = 0.0, 0, rng.exponential(10.0)
    times = []
    while len(times) < n:
        t += rng.exponential(1.0 / rates[state])
        while t > switch:  # the state changes at exponential times
            state, switch = 1 - state, switch + rng.exponential(10.0)
        times.append(t)
    t_ns = [START_NS + int(round(x * 1e7)) * 100 for x in times]
    prompt = np.minimum(np.round(rng.lognormal(np.log(prompt_median), prompt_sigma, n)), 8192).astype(int).clip(1)
    output = np.minimum(np.round(rng.lognormal(np.log(24), 1.0, n)), 1024).astype(int).clip(1)
    return t_ns, prompt.tolist(), output.tolist()


PRESSURE = "azure_code_pressure.csv"


def pressure_requests() -> tuple[list[int], list[int], list[int]]:
    """The over-committed trace: the public code trace's first-minute rate, prompts of thousands."""
    return requests(64, seed=21, rates=(1.05, 1.05), prompt_median=2048, prompt_sigma=0.6)


def routing(layers: int = 4, steps: int = 8, tokens: int = 64, experts: int = 8, top_k: int = 2,
            seed: int = 14) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(seed))
    out = np.full((layers, steps, tokens, top_k), -1, dtype=np.int8)
    for layer, s in enumerate((0.4, 0.8, 1.2, 0.6)[:layers]):
        order = rng.permutation(experts)
        logw = np.empty(experts)
        logw[order] = -s * np.log(np.arange(1, experts + 1))
        for step in range(steps):
            n = int(rng.integers(40, tokens + 1))
            keys = logw[None, :] - np.log(-np.log(rng.random((n, experts))))
            out[layer, step, :n] = np.argsort(-keys, axis=1)[:, :top_k]
    return out


def write_npz(path: Path, **arrays: np.ndarray) -> None:
    """np.savez_compressed with a fixed timestamp in every zip entry (reproducible bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, a in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            body = io.BytesIO()
            np.lib.format.write_array(body, np.ascontiguousarray(a), allow_pickle=False)
            z.writestr(info, body.getvalue())
    path.write_bytes(buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE), help="directory to write into (default: beside this script)")
    out = Path(ap.parse_args().out)
    os.makedirs(out, exist_ok=True)
    (out / "azure_code_sample.csv").write_text(format_azure(*requests()))
    (out / PRESSURE).write_text(format_azure(*pressure_requests()))
    write_npz(out / "moe_routing_sample.npz", experts=routing())
    for name in ("azure_code_sample.csv", PRESSURE, "moe_routing_sample.npz"):
        print(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()

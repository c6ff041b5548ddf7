"""Expert-routing traces for moe: which experts each token went to, per layer and step.

Read: an ``.npz`` file with an integer array ``experts`` of shape [layers, steps, tokens,
top_k] ([steps, tokens, top_k] for one layer); a token whose experts are all -1 is absent
(steps of different sizes pad with it). The STeP artifact's routing files as published
(stanford-ppl/step_artifact: ``ITERATION_LAYER.npz`` with one array ``data`` of [tokens,
top_k]), one file or their folder, keeping the artifact's layer and iteration numbers. Or a
Parquet file in long form, one row per routed (token, expert): columns ``layer``, ``step``,
``token``, ``expert``, a token's rows in rank order. Every token must go to the same number (top_k) of distinct experts.

A run replays a selection: the chosen layers (all by default) of each step, step-major
(step 0 layer 0, step 0 layer 1, ...: a forward pass runs its layers in order), at most
``steps`` of those and the first ``tokens`` tokens of each (0: all). The report gives the
popularity measured on what was replayed (``skew_of``, ``imbalance_of``), for synthetic
Zipf routing as much as for a trace.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.serving.trace import TraceError, missing


@dataclass(frozen=True, eq=False)
class RoutingTrace:
    """The routed steps a run replays: every step's [tokens, top_k] experts, concatenated."""

    routes: np.ndarray  # [total tokens, top_k] expert ids
    offsets: np.ndarray  # [steps + 1]: step k's tokens are routes[offsets[k]:offsets[k + 1]]
    source: tuple[tuple[int, int], ...]  # (trace layer, trace step) of every simulated step

    @property
    def steps(self) -> int:
        return len(self.offsets) - 1

    @property
    def top_k(self) -> int:
        return int(self.routes.shape[1])

    @property
    def max_expert(self) -> int:
        return int(self.routes.max()) if self.routes.size else -1

    def step(self, k: int) -> np.ndarray:
        return self.routes[self.offsets[k]:self.offsets[k + 1]]

    def tokens(self, k: int) -> int:
        return int(self.offsets[k + 1] - self.offsets[k])


class ExpertOutOfRange(TraceError):
    """A routed expert id at or past the run's expert count (a config that disagrees with its trace)."""


def _check_tokens(where: str, experts: np.ndarray, count: int | None = None) -> None:
    """Every token's experts are distinct, not negative and (``count`` given) below ``count`` ([tokens, top_k])."""
    if (experts < 0).any():
        t = int(np.flatnonzero((experts < 0).any(axis=1))[0])
        raise TraceError(f"{where}, token {t}: negative expert id")
    if count is not None and (experts >= count).any():  # before the duplicates: ids all 99 are out of range
        t = int(np.flatnonzero((experts >= count).any(axis=1))[0])
        raise ExpertOutOfRange(f"{where}, token {t}: expert {int(experts[t].max())} is out of range "
                         f"(the run has {count} experts: ids 0..{count - 1})")
    srt = np.sort(experts, axis=1)
    same = srt[:, 1:] == srt[:, :-1]
    if same.any():
        t, j = (int(x[0]) for x in np.nonzero(same))
        raise TraceError(f"{where}, token {t}: routed twice to expert {int(srt[t, j])}")


def _from_npz(path: Path) -> dict[tuple[int, int], np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            names = list(z.files)
            a = z["experts"] if "experts" in names else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TraceError(f"{path}: not a readable .npz file ({exc})") from None
    if a is None:
        if "data" in names:  # the STeP artifact's form, under a name that does not say which step
            raise TraceError(f"{path}: an array 'data' is a STeP routing file, read as published when it is named "
                             "ITERATION_LAYER.npz (like 008_010.npz); else convert it: python "
                             f"examples/traces/convert_routing.py step {path} --out trace.npz")
        raise TraceError(f"{path}: no array 'experts' (found {', '.join(names) or 'none'}); "
                         "examples/traces/convert_routing.py writes one from top-k expert ids")
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or not np.issubdtype(a.dtype, np.integer):
        raise TraceError(f"{path}: 'experts' must be integers of shape [layers, steps, tokens, top_k], "
                         f"got {a.dtype} {list(a.shape)}")
    out = {}
    for layer in range(a.shape[0]):
        for step in range(a.shape[1]):
            e = a[layer, step].astype(np.int64)
            absent = (e < 0).all(axis=1)
            out[(layer, step)] = e[~absent]
    return out


def _is_step_file(path: Path) -> bool:
    """A STeP artifact routing file as published: ITERATION_LAYER.npz holding an array ``data``."""
    if not STEP_NAME.fullmatch(path.name):
        return False
    try:
        with np.load(path, allow_pickle=False) as z:
            return "data" in z.files and "experts" not in z.files
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return False


def _from_parquet(path: Path) -> dict[tuple[int, int], np.ndarray]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None
    names = {n.lower(): n for n in table.column_names}
    want = ("layer", "step", "token", "expert")
    missing = [c for c in want if c not in names]
    if missing:
        raise TraceError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(want)}")
    cols = []
    for c in want:
        col = table[names[c]]
        if not pa.types.is_integer(col.type) or col.null_count:
            raise TraceError(f"{path}: column {c} must be whole numbers without gaps (got {col.type})")
        cols.append(col.to_numpy().astype(np.int64))
    layer, step, token, expert = cols
    for name, c in zip(want, cols):
        if len(c) and c.min() < 0:
            raise TraceError(f"{path}: row {int(np.argmin(c)) + 1}: {name} is negative")
    order = np.lexsort((token, step, layer))  # stable: a token's rows keep their rank order
    layer, step, token, expert = layer[order], step[order], token[order], expert[order]
    keys = np.stack([layer, step, token], axis=1)
    starts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1)])
    sizes = np.diff(np.r_[starts, len(keys)])
    if len(sizes) and (sizes != sizes[0]).any():
        bad = int(np.flatnonzero(sizes != sizes[0])[0])
        lyr, stp, tok = keys[starts[bad]]
        raise TraceError(f"{path}: layer {lyr}, step {stp}, token {tok} goes to {sizes[bad]} experts; "
                         f"the first token to {sizes[0]} (every token needs the same top_k)")
    k = int(sizes[0]) if len(sizes) else 0
    routes = expert.reshape(-1, k) if k else np.zeros((0, 0), dtype=np.int64)
    tok_keys = keys[starts]
    out: dict[tuple[int, int], np.ndarray] = {}
    bounds = np.flatnonzero(np.r_[True, (tok_keys[1:, :2] != tok_keys[:-1, :2]).any(axis=1), True])
    for a, b in zip(bounds[:-1], bounds[1:]):
        out[(int(tok_keys[a, 0]), int(tok_keys[a, 1]))] = routes[a:b]
    return out


def read_routing(path: str | Path, experts: int | None = None) -> dict[tuple[int, int], np.ndarray]:
    """{(layer, step): [tokens, top_k] experts} of a routing trace file, checked (every id below ``experts``
    when given: a run's expert count, so an id out of range is named before anything is sized by it)."""
    p = Path(path)
    if p.is_dir():  # the STeP artifact's folder of one model and batch (mixtral_b64/), as published
        files = sorted(f for f in p.iterdir() if STEP_NAME.fullmatch(f.name))
        if not files:
            raise TraceError(f"{p}: a directory of routing files needs ITERATION_LAYER.npz files (like 008_010.npz)")
        steps = from_step_artifact(files)
    elif not p.is_file():
        raise missing("routing trace", p)
    elif p.suffix.lower() == ".npz" and _is_step_file(p):
        steps = from_step_artifact([p])
    elif p.suffix.lower() == ".npz":
        steps = _from_npz(p)
    elif p.suffix.lower() in (".parquet", ".pq"):
        steps = _from_parquet(p)
    else:
        raise TraceError(f"{p}: expected a .npz or .parquet routing trace")
    ks = {e.shape[1] for e in steps.values() if len(e)}
    if not ks:
        raise TraceError(f"{p}: no routed tokens")
    if len(ks) > 1:
        raise TraceError(f"{p}: tokens go to {sorted(ks)} experts in different steps "
                         "(every token needs the same top_k)")
    for (layer, step), e in sorted(steps.items()):
        _check_tokens(f"{p}: layer {layer}, step {step}", e, experts)
    return steps


def select(steps: dict[tuple[int, int], np.ndarray], layers: list[int] | None = None, max_steps: int = 0,
           max_tokens: int = 0) -> RoutingTrace:
    """The simulated steps: the chosen layers of each trace step, step-major, at most
    ``max_steps`` of them (0: all), the first ``max_tokens`` tokens of each (0: all).
    A (layer, step) without tokens is no step."""
    have = sorted({layer for layer, _ in steps})
    chosen = list(layers) if layers else have
    unknown = [x for x in chosen if x not in have]
    if unknown:
        raise TraceError(f"layer(s) {unknown} are not in the trace (it has {have[0]}..{have[-1]})")
    order = sorted((s, layer) for layer, s in steps if layer in chosen and len(steps[(layer, s)]))  # empty: no step
    if not order:
        raise TraceError(f"layer(s) {chosen} of the trace route no token")
    if max_steps:
        order = order[:max_steps]
    parts = [steps[(layer, s)][: max_tokens or None] for s, layer in order]
    offsets = np.r_[0, np.cumsum([len(x) for x in parts])].astype(np.int64)
    k = next(x.shape[1] for x in steps.values() if len(x))
    routes = np.concatenate(parts).astype(np.int64) if parts else np.zeros((0, k), dtype=np.int64)
    return RoutingTrace(routes, offsets, tuple((layer, s) for s, layer in order))


def skew_of(counts: np.ndarray) -> float:
    """Zipf exponent of expert popularity: minus the least-squares slope of log(tokens) against
    log(rank) over the experts that got any (nan for fewer than two)."""
    c = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    c = c[c > 0]
    if len(c) < 2:
        return float("nan")
    x, y = np.log(np.arange(1, len(c) + 1, dtype=np.float64)), np.log(c)
    x -= x.mean()
    return float(-(x * (y - y.mean())).sum() / (x * x).sum())


def imbalance_of(step_counts: list[np.ndarray]) -> float:
    """Mean over steps of (tokens of the busiest expert) / (mean tokens per expert)."""
    ratios = [c.max() / c.mean() for c in step_counts if c.sum() > 0]
    return float(np.mean(ratios)) if ratios else float("nan")


def padded(steps: dict[tuple[int, int], np.ndarray]) -> tuple[np.ndarray, list[int], list[int]]:
    """The .npz form of ``steps``: experts [layers, steps, tokens, top_k], absent tokens -1,
    with the trace's layer and step numbers of each index (numbered densely in order)."""
    layers = sorted({lyr for lyr, _ in steps})
    step_ids = sorted({s for _, s in steps})
    k = next(e.shape[1] for e in steps.values() if len(e))
    n = max(len(e) for e in steps.values())
    dtype = np.int16 if max(int(e.max()) for e in steps.values() if len(e)) < 2**15 else np.int32
    out = np.full((len(layers), len(step_ids), n, k), -1, dtype=dtype)
    for (lyr, s), e in steps.items():
        out[layers.index(lyr), step_ids.index(s), :len(e)] = e
    return out, layers, step_ids


def step_file(p: Path) -> np.ndarray:
    """[tokens, top_k] expert ids of one STeP routing file (an integer array ``data``), each
    token's experts distinct and not negative; TraceError naming what is wrong."""
    try:
        with np.load(p, allow_pickle=False) as z:
            data = z["data"] if "data" in z else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise TraceError(f"{p}: not a readable .npz file ({exc})") from None
    if data is None or data.ndim != 2 or not np.issubdtype(data.dtype, np.integer) or data.size == 0:
        raise TraceError(f"{p}: expected an integer array 'data' of [tokens, top_k]")
    data = data.astype(np.int64)
    _check_tokens(str(p), data)
    return data


STEP_NAME = re.compile(r"(\d+)_(\d+)\.npz")


def from_step_artifact(paths: list[Path]) -> dict[tuple[int, int], np.ndarray]:
    """{(layer, iteration): [tokens, top_k]} from the STeP artifact's routing files, named
    ``NNN_LLL.npz`` (iteration, then layer, as its scripts read them:
    ``dyn_tiling/expert_routing/mixtral_b64/008_010.npz``), each an array ``data`` of
    [tokens, top_k] expert ids."""
    out = {}
    for p in paths:
        m = STEP_NAME.fullmatch(p.name)
        if not m:
            raise TraceError(f"{p}: expected a name ITERATION_LAYER.npz, like 008_010.npz (iteration 8, layer 10)")
        out[(int(m.group(2)), int(m.group(1)))] = step_file(p)
    if not out:
        raise TraceError("no ITERATION_LAYER.npz files (like 008_010.npz)")
    return out

"""Virtualisation against realloc-and-copy and static allocation under STeP's dynamic tiling: one MoE layer
(moe-tiling) at Mixtral-8x7B's and Qwen3-30B-A3B's widths, on the routing files STeP's artifact publishes
(benchmarks/data/step, docs/traces.md), on STeP's abstract machine (preset "step").

A dynamic token tile is created empty and grown a token row at a time to its expert's n_e rows, so how the
MU policy grows a buffer is exactly what the routing exercises. The widths are the models' own
(mapping/models.py, from their config.json: Mixtral hidden 4096, expert FFN 14336, 8 experts top-2; Qwen3
hidden 2048, expert FFN 768, 128 experts top-8), the same widths STeP's artifact runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from cluster.evaluate.studies.common import bars, ids, num, pick
from cluster.evaluate.studies.moe_widths import widths
from cluster.evaluate.study import Check, Column, Row, Study, col

ROUTING = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "step" / "dyn_tiling" / "expert_routing"
FILES = {  # routing set -> (model preset, the artifact's file); the b1024 sets only in the full run
    "mixtral_b64": ("mixtral-8x7b", "mixtral_b64/008_010.npz"),
    "qwen_b64": ("qwen3-30b-a3b", "qwen_b64/032_012.npz"),
    "mixtral_b1024": ("mixtral-8x7b", "mixtral_b1024/019_009.npz"),
    "qwen_b1024": ("qwen3-30b-a3b", "qwen_b1024/022_016.npz"),
}
POLICIES: dict[str, dict[str, object]] = {
    "virtual": {"memory.policy": "virtual"},
    "realloc-copy": {"memory.policy": "realloc-copy", "memory.initial_bytes": 4096, "memory.growth": 2.0},
    "static-multi": {"memory.policy": "static-multi", "memory.buffers_per_mu": 4},
    "static-single": {"memory.policy": "static-single"},
}
STATIC_TILE = 16  # STeP's static baseline of Fig. 9 (Mixtral, batch 64): tile 16 takes 1.65x dynamic's cycles
FIG9_SPEEDUP = 1.65  # Sohn et al., ASPLOS 2026, Fig. 9 (the artifact README's target: within 5 %)
ENDED = ("completed", "deadlocked", "failed")
DTYPE, ACCUM = 2, 4  # bf16 weights and activations, fp32 outputs (the workload's defaults)


def routes(name: str) -> np.ndarray:
    """The [tokens, top_k] expert ids of a routing set, read straight from the artifact's npz (array 'data')."""
    with np.load(ROUTING / FILES[name][1]) as f:
        return np.asarray(f["data"], dtype=np.int64)


def _side(r: np.ndarray) -> int:
    """A square grid holding moe-tiling's CUs (top_k scatters and combiners, 3 a active expert) twice over."""
    need = 2 * r.shape[1] + 3 * int((np.bincount(r.ravel()) > 0).sum())
    return max(8, math.ceil(math.sqrt(2 * need)))


def _point(name: str, policy: str, tile: int | None = None) -> dict:
    model, path = FILES[name]
    w, r = widths(model), routes(name)
    side = _side(r)
    out = {"chip.rows": side, "chip.cols": side, "run.max_cycles": 10**9,
           "workload.tiling.routing": str(ROUTING / path), "workload.tiling.experts": w["experts"],
           "workload.tiling.hidden": w["hidden"], "workload.tiling.expert_ffn": w["expert_ffn"], **POLICIES[policy]}
    if tile is not None:  # the base's tile is "dynamic"
        out["workload.tiling.tile"] = tile
    return out


def _points(quick: bool) -> list[dict]:
    sets = ["mixtral_b64", "qwen_b64"] + ([] if quick else ["mixtral_b1024", "qwen_b1024"])
    return [_point(s, p) for s in sets for p in POLICIES] + [_point("mixtral_b64", "virtual", STATIC_TILE)]


def routing_of(r: Row) -> str:
    """Which routing set a row ran on (from its routing file's folder)."""
    return Path(str(r.get("workload_tiling_routing") or "")).parent.name or "?"


def _policy(r: Row) -> str:
    return str(r.get("policy") or r.get("memory_policy"))  # a point refused before running has only its swept values


def _case(r: Row) -> str:
    tile = r.get("workload_tiling_tile")
    return f"{routing_of(r)} {_policy(r)}" + (f" tile {tile}" if tile not in (None, "dynamic") else "")


def _dynamic(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.get("workload_tiling_tile") in (None, "dynamic")]


def weight_bytes(name: str) -> int:
    """Dynamic tiling's off-chip bytes, closed form: each active expert's three D x F matrices once, plus the
    input (D bf16), output (D fp32) and routing weights (k bf16) a token (STeP's artifact, dyn_tiling)."""
    w, r = widths(FILES[name][0]), routes(name)
    active = int((np.bincount(r.ravel(), minlength=w["experts"]) > 0).sum())
    b, k, d = r.shape[0], r.shape[1], w["hidden"]
    return 3 * d * w["expert_ffn"] * DTYPE * active + b * d * (DTYPE + ACCUM) + b * k * DTYPE


def realloc_copied(name: str, initial: int = 4096, growth: float = 2.0) -> int:
    """realloc-copy's bytes copied, brute force: each expert's token tile starts at ``initial`` bytes and takes
    a D-element bf16 row at a time; a row that does not fit moves the tile (what it holds copied) to
    max(needed, growth x capacity)."""
    w, r = widths(FILES[name][0]), routes(name)
    row = w["hidden"] * DTYPE
    out = 0
    for n in np.bincount(r.ravel()).tolist():
        cap, used = initial, 0
        for _ in range(n):
            if used + row > cap:
                out += used
                cap = max(used + row, int(cap * growth))
            used += row
    return out


def _offchip(r: Row) -> int | None:
    if r.get("hbm_read_bytes") is None:
        return None
    return int(r["hbm_read_bytes"]) + int(r.get("hbm_write_bytes") or 0)


def largest_buffer(name: str) -> int:
    """The largest MU buffer a dynamic tiling asks for: the busiest expert's fp32 [n_e, D] accumulator."""
    return int(np.bincount(routes(name).ravel()).max()) * widths(FILES[name][0])["hidden"] * ACCUM


def _refused(r: Row) -> Check:
    """A point that stopped because an MU refused a buffer: a finding when the closed form agrees it cannot fit
    (the busiest expert's accumulator against a static slot, a quarter of STeP's 16 MiB MU)."""
    from mapping.chips import RDA_PRESETS

    why = (r.get("point_error") or "").strip().splitlines()[-1].strip() if r.get("point_error") else ""
    name, p = routing_of(r), _policy(r)
    slot = RDA_PRESETS["step"].mu_bytes * STATIC_SHARE.get(p, 1.0)
    need = largest_buffer(name) if name in FILES else 0
    return Check(f"{name} {p}: refused, and the closed form agrees it does not fit", f"stopped: {why[:120]}",
                 f"the busiest expert's accumulator, {num(need)} B > a {p} slot of {num(int(slot))} B",
                 ("refused" in why or "needs" in why) and need > slot, ids(r))


def _routing_checks(rows: list[Row]) -> list[Check]:
    """The routing as the workload read it, against numpy's count of the same file."""
    from sim.workloads.routing_trace import step_file

    out = []
    for name in dict.fromkeys(routing_of(r) for r in rows):
        if name not in FILES:
            continue
        r = routes(name)
        counts = np.bincount(r.ravel(), minlength=widths(FILES[name][0])["experts"])
        mine = np.bincount(step_file(ROUTING / FILES[name][1]).ravel(), minlength=len(counts))
        ran = [x for x in _dynamic(rows) if routing_of(x) == name]
        active = int((counts > 0).sum())
        out.append(Check(f"{name}: the workload reads the artifact's routing as numpy counts it",
                         f"{r.shape[0]} tokens top-{r.shape[1]}, {active} active experts of {len(counts)}, tokens "
                         f"an expert {int(counts.min())}-{int(counts.max())}",
                         "the same counts (the workload's step_file vs np.load of 'data'), top-k as the model's "
                         "config", bool(np.array_equal(mine, counts)) and r.shape[1] == widths(FILES[name][0])["top_k"],
                         ids(*ran)))
        done = [x for x in ran if x.get("status") == "completed"]
        if done:
            want = weight_bytes(name)
            got = sorted({_offchip(x) or 0 for x in done})  # 0: a completed row without the tier's bytes
            out.append(Check(f"{name}: dynamic tiling streams each active expert's weights once, whatever the "
                             "policy", f"{', '.join(num(g) for g in got)} B off chip",
                             f"{num(want)} B: 3 x D x F x 2 B x {active} active experts + the tokens' input, "
                             "output and routing weights (closed form)", got == [want], ids(*done)))
    return out


def _policy_checks(rows: list[Row]) -> list[Check]:
    out = []
    for r in _dynamic(rows):
        name, p = routing_of(r), _policy(r)
        if r.get("point_status") == "error":
            out.append(_refused(r))
        elif p == "virtual":
            out.append(Check(f"{name} virtual: completes and copies nothing", f"{r['status']}, "
                             f"{num(r['bytes_copied'])} B copied", "completed, 0 B (blocks are mapped, never moved)",
                             r["status"] == "completed" and r["bytes_copied"] == 0, ids(r)))
        elif p == "realloc-copy" and r["status"] == "completed" and name in FILES:
            want = realloc_copied(name)
            out.append(Check(f"{name} realloc-copy: copies what its growing tiles held at each move",
                             f"{num(r['bytes_copied'])} B copied", f"{num(want)} B (brute force over the file's "
                             "tokens an expert, 4 KiB first, x2 growth)", r["bytes_copied"] == want, ids(r)))
        elif r["status"] == "completed" and p in STATIC_SHARE:
            out.append(_static(r))
        else:  # a static or realloc policy that ran out of room: a finding, said with its reason
            out.append(Check(f"{name} {p}: ends as completed, or deadlocked/failed saying why",
                             f"{r['status']}" + (f" ({r['status_detail'][:100]})" if r.get("status_detail") else ""),
                             "one of completed, deadlocked, failed", r["status"] in ENDED, ids(r)))
    return out


STATIC_SHARE = {"static-single": 1.0, "static-multi": 1 / 4}  # of a MU, a static buffer (buffers_per_mu 4)


def _static(r: Row) -> Check:
    """A static policy reserves its whole slot however few rows the tile holds: each active expert's tile and
    accumulator on MUs of their own, so at the peak 2 x active x slot of the grid's MUs (closed form)."""
    from dataclasses import replace

    from mapping.chips import RDA_PRESETS

    name, p = routing_of(r), _policy(r)
    mus = replace(RDA_PRESETS["step"], rows=int(r["chip_rows"]), cols=int(r["chip_cols"])).mu_count
    active = int((np.bincount(routes(name).ravel()) > 0).sum())
    want = 2 * active * STATIC_SHARE[p] / mus
    return Check(f"{name} {p}: completes, reserving whole slots", f"completed, peak reserved "
                 f"{r['peak_mu_reserved']:.4f} of the MUs", f"{want:.4f} = 2 x {active} active experts x "
                 f"{STATIC_SHARE[p]:g} MU / {mus} MUs (closed form)", math.isclose(r["peak_mu_reserved"], want), ids(r))


def _judge(rows: list[Row]) -> list[Check]:
    out = _routing_checks(rows) + _policy_checks(rows)
    static = next((r for r in rows if r.get("workload_tiling_tile") not in (None, "dynamic")), None)
    dyn = pick(_dynamic(rows), policy="virtual", workload_tiling_routing=static and static["workload_tiling_routing"])
    if static and dyn and static.get("sim_cycles") and dyn.get("sim_cycles"):
        speed = static["sim_cycles"] / dyn["sim_cycles"]
        out.append(Check(f"mixtral_b64: static tile {STATIC_TILE} over dynamic tiling, cycles",
                         f"{speed:.3f}x", f"{FIG9_SPEEDUP}x within 5 % (Sohn et al., ASPLOS 2026, Fig. 9)",
                         abs(speed / FIG9_SPEEDUP - 1) <= 0.05, ids(static, dyn)))
    return out


def _draw(rows: list[Row], plt):
    return bars(rows, _case, (("cycles", "sim_cycles"), ("peak MU reserved", "peak_mu_reserved"),
                              ("bytes copied", "bytes_copied"), ("off-chip bytes", _offchip)),
                plt, "MoE layer, STeP's routing files, dynamic tiling per MU policy (preset step)")


STUDY = Study(
    name="moe-tiling", title="Virtualisation vs realloc-copy vs static under MoE dynamic tiling",
    question="When each active expert's token tile grows a row at a time to the tokens the router sent it "
             "(STeP's dynamic tiling), what do virtual blocks buy over reallocating and copying, and over one or "
             "several static buffers per MU?",
    scale="real widths: one Mixtral-8x7B and one Qwen3-30B-A3B MoE layer at their published widths, on the routing "
          "files STeP's artifact publishes (batch 64; the full run adds batch 1,024), on STeP's abstract machine",
    base="step_moe.toml", points=_points, case=_case,
    columns=(col("status", "status", "{}"), col("cycles", "sim_cycles", "{:,}"),
             col("peak reserved", "peak_mu_reserved", "{:.4f}"), col("peak util.", "peak_mu_utilization", "{:.4f}"),
             col("bytes copied", "bytes_copied", "{:,}"), Column("off-chip bytes", _offchip, "{:,}")),
    judge=_judge, draw=_draw,
    notes=("widths: mapping/models.py from the models' config.json (Mixtral-8x7B-v0.1: hidden_size 4096, "
           "intermediate_size 14336, num_local_experts 8, num_experts_per_tok 2; Qwen3-30B-A3B: hidden_size 2048, "
           "moe_intermediate_size 768, num_experts 128, num_experts_per_tok 8), as STeP's artifact runs them",))

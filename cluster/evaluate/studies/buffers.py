"""Many buffers per MU against one, at real scale: one Llama-3.1-8B layer's decode step on the whole sn40l
with its K and V caches in MUs (cluster/evaluate/bases/decode_kv_mu_sn40l.toml), 8 sequences whose
context grows until the KV no longer fits, under one buffer per MU, four, and virtual blocks.

Closed forms: a token of one layer's KV is 8 KV heads x 128 x 2 (K and V) x 2 B = 4 KiB, so between two
contexts the live bytes grow by 8 x (difference) x 4 KiB of the chip's 1,040 x 512 KiB; at 16,384 tokens
the KV alone is 98.5 % of the MUs, which no policy can hold beside the layer's tile buffers."""

from __future__ import annotations

from cluster.evaluate.studies.common import ids
from cluster.evaluate.study import Check, Column, Row, Study, col

SEQUENCES = 8
KV_TOKEN_BYTES = 8 * 128 * 2 * 2  # one layer of Llama-3.1-8B: KV heads x head dim x (K, V) x bf16
MU_BYTES = 1040 * 512 * 1024  # sn40l (mapping/chips.py)
POLICIES: dict[str, dict[str, object]] = {"static-single": {"memory.policy": "static-single"},
            "static-multi": {"memory.policy": "static-multi", "memory.buffers_per_mu": 4},
            "virtual": {"memory.policy": "virtual", "memory.block_bytes": "4KiB"},
            "virtual+nearest": {"memory.policy": "virtual", "memory.block_bytes": "4KiB", "memory.spill": "nearest"}}
CONTEXTS = {True: (4096, 16384), False: (1024, 4096, 8192, 16384)}  # tokens a sequence: --quick, full
KV_READ = "workload.dataflow.graph.serve-step.kv_read"


def kv_share(context: int) -> float:
    """The layer's KV of ``SEQUENCES`` sequences of ``context`` tokens, as a share of the chip's MU bytes."""
    return SEQUENCES * context * KV_TOKEN_BYTES / MU_BYTES


def _points(quick: bool) -> list[dict]:
    return [{**p, "workload.dataflow.graph.serve-step.keys": SEQUENCES * (n + 1), KV_READ: SEQUENCES * n,
             "workload.dataflow.passes": 2} for n in CONTEXTS[quick] for p in POLICIES.values()]


def _context(r: Row) -> int:
    v = next((v for k, v in r.items() if k.endswith("kv_read") and v), 0)
    return int(v) // SEQUENCES


def _policy(r: Row) -> str:
    p = str(r.get("policy") or r.get("memory_policy"))
    spill = r.get("memory_spill")
    return f"{p}+{spill}" if spill and spill != "none" else p


def _case(r: Row) -> str:
    return f"{_policy(r)}, {_context(r):,} tokens"


def _ok(r: Row) -> bool:
    return r.get("point_status") != "error" and r.get("status") == "completed"


def held(r: Row) -> bool:
    """Completed with the KV in the MUs: its peak live bytes at least the KV's (kv = "mu" reads a KV that does
    not fit the plan's room from HBM instead, and then completes without holding it)."""
    return _ok(r) and r["peak_mu_utilization"] >= kv_share(_context(r))


def _outcome(r: Row) -> str:
    if r.get("point_status") == "error":
        return "refused"
    return "held" if held(r) else ("KV off chip" if _ok(r) else str(r.get("status")))


def _longest(rows: list[Row], policy: str) -> int:
    return max((_context(r) for r in rows if _policy(r) == policy and held(r)), default=0)


def _growth(rows: list[Row]) -> list[Check]:
    """Virtual's live bytes against the closed form, between the shortest and longest contexts it held."""
    v = sorted((r for r in rows if _policy(r).startswith("virtual") and held(r)), key=_context)
    if len(v) < 2 or _context(v[0]) == _context(v[-1]):
        return []
    a, b = v[0], v[-1]
    grew = b["peak_mu_utilization"] - a["peak_mu_utilization"]
    want = kv_share(_context(b)) - kv_share(_context(a))
    return [Check(f"virtual's peak utilisation grows by the KV's bytes from {_context(a):,} to {_context(b):,} "
                  "tokens", f"+{grew:.4f} of the MU bytes", f"+{want:.4f} (closed form: {SEQUENCES} x "
                  f"{_context(b) - _context(a):,} tokens x 4 KiB over 1,040 x 512 KiB), within 10 %",
                  abs(grew - want) <= 0.1 * want, ids(a, b))]


def _judge(rows: list[Row]) -> list[Check]:
    out = _growth(rows)
    for r in rows:
        if _policy(r) == "virtual" and _context(r) > MU_BYTES // 1040 // (128 * 2):
            out.append(Check(f"virtual without spill, {_context(r):,} tokens: a buffer outgrows its MU",
                             _outcome(r), "not held: a sequence's K (or V) of one KV head is "
                             f"{_context(r):,} x 256 B > 512 KiB, and a virtual buffer's blocks stay in its MU "
                             "(closed form; 2,048 tokens at most)", not held(r), ids(r)))
    longest = {p: _longest(rows, p) for p in POLICIES}
    out.append(Check("what each holds on chip: the longest context completed with its KV in the MUs",
                     ", ".join(f"{p} {n:,}" if n else f"{p} none" for p, n in longest.items()),
                     "static-multi and virtual+nearest hold more than static-single, which cannot place the "
                     "layer's buffers one a MU (kv-on-chip: 547,880,960 B asked of 545,259,520 at 1,024 tokens)",
                     min(longest["static-multi"], longest["virtual+nearest"]) > longest["static-single"], ids(*rows)))
    for n in sorted({_context(r) for r in rows}):
        m = next((r for r in rows if _policy(r) == "static-multi" and _context(r) == n and held(r)), None)
        v = next((r for r in rows if _policy(r).startswith("virtual") and _context(r) == n and held(r)), None)
        if m and v:
            out.append(Check(f"{n:,} tokens: four buffers per MU reserve more than virtual blocks at their peak",
                             f"{m['peak_mu_reserved']:.4f} vs {v['peak_mu_reserved']:.4f} ({_policy(v)})",
                             "more (a static slot is a quarter MU whatever it holds; the toy's known result, "
                             "benchmarks/memory_policies.py study 2)", m["peak_mu_reserved"] > v["peak_mu_reserved"],
                             ids(m, v)))
    full = [r for r in rows if kv_share(_context(r)) > 0.95]
    if full:
        out.append(Check(f"no policy holds {SEQUENCES} x {_context(full[0]):,} tokens on chip",
                         ", ".join(f"{_policy(r)}: {_outcome(r)}" for r in full),
                         f"none held: the KV alone is {kv_share(_context(full[0])):.1%} of the MU bytes (closed "
                         "form), beside the layer's tile buffers", not any(held(r) for r in full), ids(*full)))
    return out


def _draw(rows: list[Row], plt):
    """Per context a group of bars, one a policy: peak reserved and peak utilisation, a run that did not hold
    the KV on chip labelled with what happened; the KV's own share (closed form) as a dashed line."""
    ns = sorted({_context(r) for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6), layout="constrained")
    width = 0.8 / len(POLICIES)
    for ax, field in zip(axes, ("peak_mu_reserved", "peak_mu_utilization")):
        for i, p in enumerate(POLICIES):
            for j, n in enumerate(ns):
                r = next((r for r in rows if _policy(r) == p and _context(r) == n), None)
                if r is None:
                    continue
                x, h = j + (i - (len(POLICIES) - 1) / 2) * width, float(r.get(field) or 0.0)
                ax.bar(x, h, width, color=f"C{i}", label=p if j == 0 else None, alpha=1.0 if held(r) else 0.45)
                if not held(r):
                    ax.text(x, h + 0.01, _outcome(r), rotation=90, ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(ns)), [f"{n:,}" for n in ns], fontsize=7)
        ax.set_xlabel("context a sequence (tokens); pale: KV not held on chip", fontsize=8)
        ax.set_ylim(0, 1.15)
        ax.grid(axis="y", alpha=0.3)
    for j, n in enumerate(ns):
        axes[1].plot([j - 0.45, j + 0.45], [kv_share(n)] * 2, ls="--", color="grey",
                     label="the KV alone (closed form)" if j == 0 else None)
    axes[0].set_ylabel("peak MU reserved", fontsize=8)
    axes[1].set_ylabel("peak MU utilisation", fontsize=8)
    axes[0].legend(fontsize=7, loc="upper left")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("Buffers per MU: Llama-3.1-8B layer, 8 sequences, KV in MUs (sn40l)", fontsize=9)
    return fig


STUDY = Study(
    name="buffers-per-mu", title="Buffers per MU: static-single vs static-multi vs virtual",
    question="With a real layer's KV caches in MUs, how much do one buffer per MU, four, and virtual blocks "
             "reserve at their peak, and how long a context does each hold on chip?",
    scale=f"real: one Llama-3.1-8B layer's decode step on the whole sn40l (kv = \"mu\"), {SEQUENCES} sequences of "
          f"{', '.join(f'{n:,}' for n in CONTEXTS[True])} tokens (--quick; "
          f"{', '.join(f'{n:,}' for n in CONTEXTS[False])} full), 2 passes",
    base="decode_kv_mu_sn40l.toml", points=_points, case=_case,
    columns=(Column("KV on chip", _outcome, "{}"), col("status", "status", "{}"), col("cycles", "sim_cycles", "{:,}"),
             col("peak reserved", "peak_mu_reserved", "{:.4f}"), col("peak util.", "peak_mu_utilization", "{:.4f}"),
             col("first-OOM util.", "first_oom_utilization", "{:.4f}"),
             col("tokens/s", "tokens_per_second", "{:,.0f}")),
    judge=_judge, draw=_draw,
    notes=tuple(f"{n:,} tokens: the KV of {SEQUENCES} sequences is {kv_share(n):.1%} of the chip's MU bytes"
                for n in CONTEXTS[False]))

"""memory.on_oom = "preempt" and memory-aware admission: known answers.

The two-sequence scenario: a 2 x 4 chip (CUs 2 and 5 are the workers, MUs 1, 3, 4, 6), one
layer of one head (a K and a V buffer per sequence), ``near`` placement: sequence 0 in slot 0
keeps K on MU 1 and V on MU 3, sequence 1 in slot 1 keeps K on MU 1 and V on MU 4, so the K
buffers share MU 1. Blocks of two tokens (256 B) and MUs of 11 blocks: the sequences (prompts
of 8 and 9 tokens, 12 tokens out) outgrow MU 1 together, never alone.
"""

import pytest

from sim.chip import messages as m
from sim.chip.config import NI_LATENCY
from sim.chip.spec import home_drams
from sim.serving.metrics import PreemptionLog, RequestLog
from sim.workloads.base import Floorplan
from sim.workloads.kv_decode import KvDecode
from tests.sim.chip.chiprun import config, listed, run

TOKEN = 64 * 2  # head_dim x dtype bytes
PROMPTS, OUT = (8, 9), 12
TIGHT, ROOMY = 11 * 256, 64 * 1024


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("preempt") / "two.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"0,{p},{OUT}\n" for p in PROMPTS))
    return str(path)


def two(trace, mu_bytes, on_oom="preempt", mode="recompute", **memory):
    mem = {"policy": "virtual", "block_bytes": 256, "on_oom": on_oom, "placement": "near", **memory}
    if on_oom == "preempt":
        mem["preempt_mode"] = mode
    return {"chip": {"preset": "plasticine", "rows": 2, "cols": 4, "mu_bytes": mu_bytes}, "memory": mem,
            "workload": {"kind": "kv-decode", "decode": {"trace": trace, "max_batch": 2, "layers": 1, "heads": 1,
                                                         "head_dim": 64}}}


def logged(results, kind):
    return sorted((x for r in results for x in r.logged if isinstance(x, kind)), key=lambda x: x.row())


def energy_count(tables, component, action):
    e = tables["energy"]
    return next(n for c, a, n in zip(e["component"], e["action"], e["count"]) if (c, a) == (component, action))


def test_the_scenario_deadlocks_without_preemption(trace):
    s = run(two(trace, TIGHT, on_oom="stall")).summary
    assert s["status"] == "deadlocked" and s["requests_finished"] == 0


def test_recompute_costs_the_preempted_sequence_its_prefill_again(trace):
    """Against the same run with room to spare: the preempted sequence's KV is written again (the
    prefill of its prompt and the tokens it had made); its attention reads and computes are those
    of the step the prefill replaces, so compute cycles do not change."""
    done = run(two(trace, TIGHT))
    x, xt, xr = done.summary, done.tables, done.simulation.outcome.reports
    done = run(two(trace, ROOMY))
    y, yt = done.summary, done.tables
    assert x["completed"] and y["completed"] and y["preemptions"] == 0 and y["oom_events"] == 0
    assert x["preemptions"] == 1 and x["tokens"] == y["tokens"] == 2 * OUT
    (p,) = logged(xr, PreemptionLog)
    assert p.what == "recompute" and p.request == 1  # the most recently admitted
    req = {r.request: r for r in logged(xr, RequestLog)}
    made = sum(c <= p.start for c in req[1].token_cycles)  # tokens it had made when preempted
    kv = PROMPTS[1] + made - 1  # its KV then (the last token is appended by the next step)
    assert p.kv_bytes == 2 * kv * TOKEN
    # its first life's buffers: what they held when it was preempted (its dropped step's append to
    # the V buffer landed, the one to K on the full MU 1 was refused)
    b = xt["buffers"]
    first = [pk for o, f, pk in zip(b["owner"], b["freed"], b["peak_bytes"]) if o == p.worker and p.start <= f <= p.end]
    assert sorted(first) == [kv * TOKEN, (kv + 1) * TOKEN]
    # every byte of that life is written again (prefill of prompt + made tokens) or was wasted
    assert energy_count(xt, "mu", "write_byte") - energy_count(yt, "mu", "write_byte") == sum(first)
    assert x["compute_cycles"] == y["compute_cycles"]
    assert x["messages"]["allocate"] - y["messages"]["allocate"] == 2  # its buffers allocated again
    assert x["messages"]["free"] - y["messages"]["free"] == 2
    assert x["messages"]["append"] - y["messages"]["append"] == 2  # the dropped step's two appends
    assert req[1].preemptions == 1 and req[0].preemptions == 0
    assert x["use_after_free"] == x["double_free"] == x["premature_free"] == x["leaks"] == 0


def _zero_load(cfg, kind, data, hops):
    (flits,) = cfg.sizing.packet_flits(kind, data)
    return cfg.noc.with_(packet_flits=flits).zero_load_latency(hops)


def test_swap_moves_the_kv_over_the_dram_bandwidth_and_the_noc_at_zero_load(trace):
    """Swap-out: per buffer, a control message to its MU, the MU's port reads it, the NoC carries it
    to the MU's DRAM interface, which writes it at its bandwidth and acknowledges; swap-in: a load
    order to that DRAM interface, which reads it at its bandwidth, the NoC carries it to the new
    buffer's MU, whose port writes it, and a read waiting for it answers. The buffers go in
    parallel, their messages leaving the worker a cycle apart."""
    raw = two(trace, TIGHT, mode="swap")
    cfg = config(raw)
    done = run(raw)
    s, res = done.summary, done.simulation.outcome.reports
    assert s["completed"] and s["preemptions"] >= 1
    spec, prog, fp = cfg.spec, KvDecode(cfg.workload, cfg), Floorplan(cfg)
    home = home_drams(spec, fp.lay)
    port = spec.mu_access_latency + spec.translation_latency  # virtual: a block-table lookup per access

    def hops(a, b):
        (ra, ca), (rb, cb) = divmod(int(fp.lay.tile[a]), spec.cols), divmod(int(fp.lay.tile[b]), spec.cols)
        return abs(ra - rb) + abs(ca - cb)

    moves = sorted(logged(res, PreemptionLog), key=lambda x: x.start)
    out = moves[0]  # the first: nothing else moves to or from DRAM, the MUs' ports are free
    assert out.what == "swap-out"
    back = next(x for x in moves if x.what == "swap-in" and x.request == out.request and x.start > out.end)
    n = out.kv_bytes // 2
    old = prog.placement(prog.workers.index(out.worker), out.request)
    new = prog.placement(prog.workers.index(back.worker), back.request)
    ends = []
    for i, mu in enumerate(old):
        d = int(home[mu])
        at_mu = out.start + NI_LATENCY + i + _zero_load(cfg, m.CONTROL, 0, hops(out.worker, mu))
        streamed = at_mu + port + -(-n // spec.mu_bytes_per_cycle)
        written = streamed + _zero_load(cfg, m.WRITE, n, hops(mu, d)) + -(-n // spec.dram_bytes_per_cycle) \
            + spec.dram_latency
        ends.append(written + _zero_load(cfg, m.ACK, 0, hops(d, out.worker)))
    assert out.moved == max(ends)
    ends = []
    for i, (was, mu) in enumerate(zip(old, new)):
        d = int(home[was])
        read = back.start + NI_LATENCY + i + _zero_load(cfg, m.CONTROL, 0, hops(back.worker, d)) \
            + spec.dram_latency + -(-n // spec.dram_bytes_per_cycle)
        written = read + _zero_load(cfg, m.APPEND, n, hops(d, mu)) + -(-n // spec.mu_bytes_per_cycle) + port
        ends.append(written + _zero_load(cfg, m.READ_RESP, 0, hops(mu, back.worker)))
    assert back.moved == max(ends)
    assert s["energy_dram_joules"] > 0 and s["use_after_free"] == s["leaks"] == s["premature_free"] == 0


def test_a_watermark_admits_the_second_sequence_only_after_the_first_is_done(trace):
    # half of every MU kept free (5.5 blocks): sequence 0 holds 4 blocks + 1 for its next step on
    # MU 1, sequence 1's prompt needs 5 more, so it waits; alone, either fits to its last token
    done = run(two(trace, TIGHT, admit_watermark=0.5))
    s, res = done.summary, done.simulation.outcome.reports
    assert s["completed"] and s["preemptions"] == 0 and s["oom_events"] == 0
    a, b = logged(res, RequestLog)
    assert b.admitted >= a.token_cycles[-1]


def test_a_request_that_can_never_fit_is_refused_not_waited_for(tmp_path):
    path = tmp_path / "three.csv"  # the middle one's 40-token prompt needs 20 blocks of an 11-block MU
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,8,4\n0,40,4\n0,9,4\n")
    done = run(two(str(path), TIGHT))
    s, t = done.summary, done.tables
    assert s["status"] == "failed" and s["completed"] and s["requests_failed"] == 1
    assert t["requests"]["status"] == ["ok", "failed", "ok"] and s["requests_finished"] == 2
    # a watermark no prompt fits under refuses every request, and the run still ends
    s = run(two(str(path), TIGHT, on_oom="stall", admit_watermark=0.9)).summary
    assert s["status"] == "failed" and s["requests_failed"] == 3 and s["oom_events"] == 0


def overcommitted(kind="kv-decode", on_oom="preempt", mode="recompute", **decode):
    """12 sequences, 8 at once, on 16 MUs of 16 KiB: far more KV than the chip holds."""
    mem = {"policy": "virtual", "block_bytes": "1KiB", "on_oom": on_oom}
    if on_oom == "preempt":
        mem["preempt_mode"] = mode
    return {"chip": {"preset": "plasticine", "rows": 4, "cols": 8, "mu_bytes": "16KiB"}, "memory": mem,
            "workload": {"kind": kind, "decode": {
                "requests": 12, "max_batch": 8, "layers": 2, "heads": 1, "head_dim": 64,
                "prompt_tokens": {"dist": "uniform", "min": 20, "max": 60},
                "output_tokens": {"dist": "uniform", "min": 40, "max": 80}, **decode}}}


def test_the_overcommitted_trace_deadlocks_under_stall():
    s = run(overcommitted(on_oom="stall")).summary
    assert s["status"] == "deadlocked" and s["stalled_at_end"] > 0


@pytest.mark.parametrize("kind,mode", [("kv-decode", "recompute"), ("kv-decode", "swap"),
                                       ("spec-decode", "recompute"), ("spec-decode", "swap")])
def test_preemption_never_deadlocks_and_the_oracle_finds_nothing(kind, mode):
    drafts = {"draft": 3, "accept": 0.6} if kind == "spec-decode" else {}  # spec-decode's own keys
    done = run(overcommitted(kind, mode=mode, **drafts))
    s, t = done.summary, done.tables
    assert s["status"] == "completed" and s["requests_finished"] == 12 and s["preemptions"] > 0
    # every token is made, preempted or not (spec-decode: the accepted drafts are drawn by step)
    assert s["tokens"] == sum(t["requests"]["tokens"])
    assert s["use_after_free"] == s["double_free"] == s["premature_free"] == s["leaks"] == 0
    assert sum(t["requests"]["preemptions"]) == s["preemptions"]
    assert 0 < s["first_oom_utilization"] <= s["peak_mu_utilization"]


def test_spec_decode_makes_the_same_tokens_preempted_or_not():
    tight = run(overcommitted("spec-decode", draft=3, accept=0.6)).summary
    roomy = overcommitted("spec-decode", draft=3, accept=0.6)
    roomy["chip"]["mu_bytes"] = "256KiB"
    loose = run(roomy).summary
    assert tight["preemptions"] > 0 and loose["preemptions"] == 0
    assert tight["tokens"] == loose["tokens"]


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_result_hash_is_the_same_for_one_and_two_shards_with_preemption(mode):
    done = run(overcommitted(mode=mode), shards=1)
    one, t1 = done.summary, done.tables
    done = run(overcommitted(mode=mode), shards=2)
    two_, t2 = done.summary, done.tables
    assert one["preemptions"] > 0
    assert one["result_hash"] == two_["result_hash"]
    assert listed(t1["requests"]) == listed(t2["requests"])

"""serve-system: a model served by a tensor-parallel group of sockets (box chips) reports the
serving metrics, and its chips as shards give the same run in one process, in two and on Ray."""

from __future__ import annotations

import json

import pytest

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.system import simulate_system
from mapping.models import model_preset

RING = {"kind": "r", "size": 2, "link_bandwidth": "100GB/s", "link_latency": "500ns", "parallelism": "TP"}


def raw(chips: int = 2, model: str = "llama-3.1-8b", requests: int = 2) -> dict:
    return {"chip": {"preset": "sn40l", "rows": 8, "cols": 16},  # the socket whose grid prices a chip's step
            "system": {"chips": chips, "chip": "sn40l", "max_seconds": 100.0,
                       "network": [{**RING, "size": chips}]},
            "workload": {"kind": "serve-system", "decode": {
                "model": model, "requests": requests, "prompt_tokens": {"dist": "fixed", "mean": 16},
                "output_tokens": {"dist": "fixed", "mean": 3}, "step_anchor_ratio": 1e9,
                "step_context_ratio": 1e9}}}


def run(config: dict, **kw):
    return simulate_system(system_config(load(RUN_SCHEMA, raw=config)), **kw)


def test_the_megatron_slice():
    """Llama-3.1-70B over 8 chips: 8 of the 64 query heads, one of the 8 KV heads, 1/8 of the MLP
    and the vocabulary a chip; over 16 chips a KV head is kept by two chips."""
    m = model_preset("llama-3.1-70b")
    s8, s16 = m.tp_slice(8), m.tp_slice(16)
    assert (s8.heads, s8.kv_heads, s8.ffn, s8.vocab) == (8, 1, 3584, 16032)
    assert s16.kv_heads == 1 and s16.heads == 4
    assert s8.layer_params * 8 == pytest.approx(m.layer_params, rel=0.001)  # the norms are replicated
    with pytest.raises(ValueError, match="not divisible"):
        m.tp_slice(3)


def test_a_group_serves_and_reports_the_serving_metrics():
    done = run(raw())
    s = done.summary
    assert s["status"] == "completed" and s["requests_finished"] == 2 and s["tokens"] == 6
    assert s["ttft_p50_seconds"] > 0 and s["tbt_p99_seconds"] > 0 and s["e2e_p99_seconds"] > s["ttft_p99_seconds"]
    assert s["serve_steps"] == 3  # both prompts in one prefill step, then two decode steps of both
    # a step's every layer all-reduces twice: 2 (p - 1) chunks a chip each time, plus the commands
    assert s["messages_total"] == 3 * 32 * 2 * 2 * 2 + 3 + 1


@pytest.mark.parametrize("collectives", ["messages", "closed-form"])
def test_chips_as_shards_give_the_same_run(ray_session, collectives):
    """One process, a shard a chip in this process and on Ray: the commands and every all-reduce
    chunk cross the shards (closed-form: only the scheduler's chip works, the follower's shard idles)."""
    cfg = raw()
    cfg["workload"]["decode"]["collectives"] = collectives
    one = run(cfg).summary
    two = run(cfg, shards=2).summary
    ray = run(cfg, shards=2, backend="ray").summary
    assert one["result_hash"] == two["result_hash"] == ray["result_hash"]
    assert one["sim_cycles"] == two["sim_cycles"] == ray["sim_cycles"]


NODE_TOML = """
[chip]
preset = "sn40l"
rows = 8
cols = 16

[system]
chips = 4
chip = "sn40l"
max_seconds = 100.0

[[system.network]]
kind = "r"
size = 4
link_bandwidth = "100GB/s"
link_latency = "500ns"
parallelism = "TP"

[workload]
kind = "serve-system"

[workload.decode]
model = "llama-3.1-70b"
requests = 3
arrival_interval = 1000
prompt_tokens = {{dist = "fixed", mean = 24}}
output_tokens = {{dist = "fixed", mean = 3}}
step_anchor_ratio = 1e9
step_context_ratio = 1e9
slo_ttft = "10s"
slo_tbt = "1s"
step_cache = "{cache}"
"""


def test_a_node_run_writes_the_serving_metrics_alike_in_one_process_and_on_ray(tmp_path, ray_session):
    """Llama-3.1-70B over 4 sockets (``rdasim run``): system_summary carries the serving metrics
    and run_requests a row a request, the same in one process and with a chip a shard on Ray; the
    first run's anchors (run_anchors) go to the step cache, and the Ray run takes them from it."""
    import pyarrow.parquet as pq

    from cluster.cli import main

    cfg = tmp_path / "node.toml"
    cfg.write_text(NODE_TOML.format(cache=tmp_path / "anchors"))
    got = {}
    for name, flags in (("one", []), ("ray", ["--shards", "4", "--backend", "ray"])):
        out = tmp_path / name
        assert main(["run", str(cfg), "--out", str(out), "--quiet", *flags]) == 0
        summary = pq.read_table(out / "system_summary").to_pylist()[0]
        reqs = pq.read_table(out / "run_requests").to_pylist()
        anchors = pq.read_table(out / "run_anchors").to_pylist()
        assert len(anchors) == summary["anchors"] == 2  # a prefill and a decode shape (ratios 1e9)
        assert summary["anchors_cached"] == (0 if name == "one" else 2)
        assert all(a["cached"] == (name == "ray") for a in anchors)
        got[name] = summary, reqs
    (one, reqs), (ray, ray_reqs) = got["one"], got["ray"]
    assert one["result_hash"] == ray["result_hash"] and ray["shards"] == 4 and ray["backend"] == "ray"
    assert one["status"] == "completed" and one["model"] == "llama-3.1-70b" and one["tp"] == 4
    assert one["requests_finished"] == 3 and one["tokens"] == 9
    assert 0 < one["ttft_p50_seconds"] <= one["ttft_p99_seconds"] < one["e2e_p99_seconds"]
    assert one["tbt_p50_seconds"] > 0 and one["goodput_requests_per_second"] > 0
    key = ("request", "status", "tokens", "ttft_seconds", "e2e_seconds")
    assert [tuple(r[k] for k in key) for r in reqs] == [tuple(r[k] for k in key) for r in ray_reqs]
    assert [r["request"] for r in reqs] == [0, 1, 2] and all(r["tokens"] == 3 for r in reqs)
    assert sorted(r["ttft_seconds"] for r in reqs)[1] == pytest.approx(one["ttft_p50_seconds"])  # the median of 3


def test_a_group_shares_prefix_blocks(tmp_path):
    """serve-system with a Mooncake-shaped trace (tests/sim/serving/test_prefix_pool.py): the
    same hits as one chip's scheduler finds, every chip holding its slice of each block once."""
    from tests.sim.serving.test_prefix_pool import BLOCK, HASHES, PROMPTS, mooncake
    from tests.sim.serving.test_prefix_sharing import ideal

    config = raw()
    config["workload"]["decode"].update(trace=mooncake(tmp_path, output=40), requests=0)
    config["memory"] = {"prefix_cache_bytes": "64GiB"}
    s = run(config).summary
    hits = sum(k for _, k in ideal(HASHES, PROMPTS, BLOCK))
    assert s["status"] == "completed" and (s["prefix_blocks"], s["prefix_hit_blocks"]) == (44, hits)
    assert s["prefix_hit_bytes"] == hits * BLOCK * 131_072  # two chips' halves of Llama-3.1-8B's K/V


def test_a_node_named_by_its_preset_chooses_its_all_reduce_by_size():
    """``system.preset = "sn40l-8"``: eight sockets fully connected (mapping/systems.py). A prefill of
    16 tokens all-reduces 128 KiB a layer half (direct: two phases of 7 messages a chip), a decode
    token 8 KiB (one-shot: 7 messages, one latency), as the alpha-beta forms cross at 9.5 KB."""
    config = raw(chips=8, requests=1)
    config["system"] = {"preset": "sn40l-8", "max_seconds": 100.0}
    s = run(config).summary
    assert s["serve_steps"] == 3 and s["tokens"] == 3
    per_half = 8 * 7  # messages of one all-reduce phase over the node
    assert s["messages_total"] == 32 * 2 * per_half * (2 + 1 + 1) + 7 * 4  # + the commands and the stop


def _toml(path, config: dict) -> str:
    """``config`` as a TOML file (tables, arrays of tables, strings, numbers)."""
    def value(v):
        return f'"{v}"' if isinstance(v, str) else repr(v)

    lines: list[str] = []

    def table(name: str, d: dict) -> None:
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {value(v)}" for k, v in d.items() if not isinstance(v, (dict, list)))
        for k, v in d.items():
            if isinstance(v, dict):
                table(f"{name}.{k}", v)
            elif isinstance(v, list):
                for item in v:
                    lines.append(f"[[{name}.{k}]]")
                    lines.extend(f"{a} = {value(b)}" for a, b in item.items())

    for name, d in config.items():
        table(name, d)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_serve_system_says_what_serve_says(tmp_path):
    """The same trace served by one socket (serve) and by a group of two (serve-system): both print
    their tokens, MU utilisation, energy, trace and serving lines with goodput and prompt tokens; the
    group's steps move the one socket's HBM bytes (its slices add up to the model, the norms replicated: within
    0.01 %), so their HBM energy agrees; run_requests has each request's prompt and TTFT parts."""
    from tests.faults.conftest import in_process

    trace = tmp_path / "trace.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,40,4\n0.00001,20,3\n")
    decode = {"trace": str(trace), "slo_ttft": "1s", "slo_tbt": "100ms", "step_cache": str(tmp_path / "anchors")}
    group = raw()
    group["workload"]["decode"] = {k: v for k, v in group["workload"]["decode"].items()
                                   if k not in ("requests", "prompt_tokens", "output_tokens")} | decode
    one = {"chip": group["chip"], "memory": {"policy": "virtual"}, "run": {"max_cycles": 10**12},
           "workload": {"kind": "serve", "decode": {**group["workload"]["decode"]}}}
    said = {}
    for name, config in (("serve", one), ("serve-system", group)):
        got = in_process("run", _toml(tmp_path / f"{name}.toml", config), "--quiet", "--json")
        assert got.returncode == 0, got.stderr
        said[name] = json.loads(got.stdout)
        text = in_process("run", tmp_path / f"{name}.toml", "--quiet").stdout
        for line in ("generated tokens/s;", "  energy ", "J per generated token", "  trace (azure): 2 requests",
                     "served (60 prompt tokens)", "goodput", "the steps' anchors' plans) peak"):
            assert line in text, (name, line, text)
    chip, sys_ = said["serve"], said["serve-system"]
    assert sys_["energy_hbm_joules"] == pytest.approx(chip["energy_hbm_joules"], rel=1e-4)
    assert sys_["hbm_read_bytes"] == pytest.approx(chip["hbm_read_bytes"], rel=1e-4)
    assert sys_["hbm_write_bytes"] == chip["hbm_write_bytes"]  # K and V: the chips' KV heads add up to the model's
    assert 0 < sys_["mean_mu_utilization"] <= sys_["peak_mu_utilization"] <= sys_["peak_mu_reserved"]
    assert sys_["prompt_tokens"] == chip["prompt_tokens"] == 60
    done = run(group)
    r = done.tables["requests"]
    assert list(r["prompt_tokens"]) == [40, 20]
    for i in range(2):
        parts = r["queueing_seconds"][i] + r["prefill_seconds"][i] + r["interference_seconds"][i]
        assert parts == pytest.approx(r["ttft_seconds"][i], rel=1e-12)


def test_the_planning_pass_names_the_groups_anchors_in_order():
    """The scheduler replayed alone at the roofline (system.planned_anchors): both 16-token prompts
    in one prefill step (32 tokens, 2 x 16 x 17 / 2 pairs), then two decode steps of both sequences
    (16 and 17 cached tokens each); their anchors in order of first need."""
    from sim.workloads.serve.costs import StepCosts
    from sim.workloads.serve.shapes import StepShape
    from sim.workloads.serve.system import planned_anchors

    cfg = system_config(load(RUN_SCHEMA, raw=raw()))
    costs = StepCosts(cfg.chip, cfg.workload.model, cfg.workload.costs)
    steps = [StepShape(32, 2 * 16 * 17 // 2, 0), StepShape.of([16, 16], []), StepShape.of([17, 17], [])]
    assert planned_anchors(cfg) == list(dict.fromkeys(costs.anchor_of(s) for s in steps))


def test_a_group_simulates_its_planned_anchors_ahead_and_serves_the_same_run():
    """With two workers the planning pass's anchors are simulated ahead in worker processes
    (run_anchors' ``ahead``), exactly those the steps are priced by (this trace batches alike at
    any price); the progress sink is told their count before the first ends ("k of n", n known);
    the run and its result hash are the run with one worker, each anchor simulated as a step needs it."""
    from cluster.jobs.job import simulate_case
    from cluster.jobs.system import SystemGroups
    from sim.workloads.serve.progress import AnchorDone, AnchorStarted, Planned
    from sim.workloads.serve.shapes import StepShape
    from sim.workloads.serve.system import planned_anchors

    done, told = {}, []
    for workers in (1, 2):
        config = raw()
        config["workload"]["decode"]["step_workers"] = workers
        cfg = system_config(load(RUN_SCHEMA, raw=config))
        done[workers] = simulate_case(SystemGroups(cfg).watched(told.append if workers == 2 else None), 1, "groups",
                                      "local", None, None, None)
    one, two = done[1], done[2]
    assert one.summary["status"] == two.summary["status"] == "completed"
    assert one.summary["result_hash"] == two.summary["result_hash"]
    a1, a2 = one.tables["anchors"], two.tables["anchors"]
    assert not any(a1["ahead"]) and all(a2["ahead"]) and all(a2["used"]) and two.summary["anchors_unused"] == 0
    used = [StepShape(*k) for k in zip(a2["tokens"], a2["keys"], a2["kv_read"])]
    assert set(used) == set(planned_anchors(cfg)) and len(used) == two.summary["anchors"] == 2
    planned = [e for e in told if isinstance(e, Planned)]
    assert len(planned) == 1 and planned[0].workers == 2 and len(planned[0].anchors) == 2
    assert told.index(planned[0]) < min(i for i, e in enumerate(told) if isinstance(e, AnchorDone))
    assert sum(isinstance(e, AnchorDone) for e in told) == 2 and not any(isinstance(e, AnchorStarted) for e in told)


def test_an_anchor_planned_and_never_needed_is_reported_not_hashed(monkeypatch):
    """A planning pass foreseeing one anchor more than the steps need (the real pass's, plus a
    decode step with four cached tokens no step reads): the extra one is simulated ahead, reported
    (``anchors_unused``, ``used`` false in run_anchors), and left out of the hashed records, so the
    run's anchors count and result hash are the run's without it."""
    from sim.workloads.serve import system
    from sim.workloads.serve.shapes import StepShape

    spare = StepShape(1, 4, 4)
    real = system.planned_anchors
    config = raw()
    config["workload"]["decode"]["step_workers"] = 2
    plain = run(config).summary
    monkeypatch.setattr(system, "planned_anchors", lambda cfg: [*real(cfg), spare])
    done = run(config)
    s, a = done.summary, done.tables["anchors"]
    assert spare not in real(system_config(load(RUN_SCHEMA, raw=config)))
    assert (s["anchors"], s["anchors_unused"]) == (plain["anchors"], 1) == (2, 1)
    assert s["result_hash"] == plain["result_hash"]
    assert [(k, used) for k, used in zip(a["kv_read"], a["used"]) if not used] == [(4, False)] and all(a["ahead"])


def test_collectives_at_their_closed_form_give_the_messages_run_within_two_percent():
    """collectives = "closed-form": no message crosses the links, the follower chips run nothing,
    and the scheduler's steps are the same steps as the messages run's (requests, steps, tokens),
    each as long within 2 %: a ring all-reduce's chunks on 4 links alone (100 GB/s, 500 ns) take
    its alpha-beta form within 1.3 % (tests/sim/system/test_algorithms.py)."""
    cfg = raw(chips=4, requests=3)
    decode = {**cfg["workload"]["decode"], "collectives": "closed-form"}
    a, b = run(cfg), run({**cfg, "workload": {**cfg["workload"], "decode": decode}})
    sa, sb = a.summary, b.summary
    assert sb["status"] == "completed" and sb["messages_total"] == 0
    assert (sb["requests_finished"], sb["tokens"], sb["serve_steps"]) == (sa["requests_finished"], sa["tokens"],
                                                                       sa["serve_steps"])

    def steps(done):
        t = done.tables["steps"]
        return [e - s for k, s, e in zip(t["kind"], t["start"], t["end"]) if k == "step"]

    assert len(steps(a)) == len(steps(b)) == sa["serve_steps"]
    for x, y in zip(steps(a), steps(b)):
        assert abs(x - y) <= 0.02 * x
    assert sb["ttft_p50_seconds"] == pytest.approx(sa["ttft_p50_seconds"], rel=0.02)
    closed = {**cfg, "workload": {**cfg["workload"], "decode": decode}}
    assert run(closed, shards=2).summary["result_hash"] == run(closed, shards=4).summary["result_hash"] \
        == sb["result_hash"]  # the scheduler's chip alone works; its shard is the same run whatever the others


def test_collectives_must_be_named():
    cfg = raw()
    decode = {**cfg["workload"]["decode"], "collectives": "analytic"}
    with pytest.raises(Exception, match="collectives"):
        run({**cfg, "workload": {**cfg["workload"], "decode": decode}})


def test_speculative_decoding_is_refused_on_a_system():
    """serve-system has no draft steps (speculative decoding runs on one socket): the key is refused, not ignored."""
    cfg = raw()
    decode = {**cfg["workload"]["decode"], "speculative": {"draft": "llama-3.2-1b", "k": 4}}
    with pytest.raises(Exception, match="speculative decoding runs in serve"):
        run({**cfg, "workload": {**cfg["workload"], "decode": decode}})

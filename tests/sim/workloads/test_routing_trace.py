"""Routing traces: a hand-made trace gives exactly its routes, in both formats, and a run replays them."""


import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sim.serving.trace import TraceError
from sim.workloads.routing_trace import imbalance_of, read_routing, select, skew_of
from tests.paths import ROOT
from tests.sim.chip.chiprun import run

# [layers 2, steps 2, tokens 3, top_k 2] of 4 experts; layer 1 step 1 has only two tokens (-1: absent)
EXPERTS = np.array([
    [[[0, 1], [2, 3], [0, 2]], [[1, 0], [1, 2], [3, 0]]],
    [[[3, 2], [3, 1], [3, 0]], [[2, 1], [0, 3], [-1, -1]]],
], dtype=np.int16)


def _npz(tmp_path, a=EXPERTS, name="r.npz"):
    np.savez(tmp_path / name, experts=a)
    return tmp_path / name


def _long_form(a=EXPERTS) -> dict:
    """One row per (token, expert) in rank order, as the Parquet format has it."""
    rows = [(lyr, s, t, int(e)) for lyr in range(a.shape[0]) for s in range(a.shape[1]) for t in range(a.shape[2])
            for e in a[lyr, s, t] if e >= 0]
    return dict(zip(("layer", "step", "token", "expert"), (list(c) for c in zip(*rows))))


def test_npz_and_parquet_give_exactly_the_routes(tmp_path):
    got = read_routing(_npz(tmp_path))
    cols = _long_form()
    # tokens in any order, each token's rows in rank order
    token = list(zip(cols["layer"], cols["step"], cols["token"]))
    keys = sorted(set(token))
    shuffled = {keys[j]: r for r, j in enumerate(np.random.default_rng(0).permutation(len(keys)))}
    order = sorted(range(len(token)), key=lambda i: shuffled[token[i]])
    pq.write_table(pa.table({k: [v[i] for i in order] for k, v in cols.items()}), tmp_path / "r.parquet")
    for steps in (got, read_routing(tmp_path / "r.parquet")):
        assert sorted(steps) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        for (lyr, s), e in steps.items():
            want = EXPERTS[lyr, s][(EXPERTS[lyr, s] >= 0).all(axis=1)]
            assert e.tolist() == want.tolist(), (lyr, s)


def test_selection_is_step_major_over_the_chosen_layers(tmp_path):
    steps = read_routing(_npz(tmp_path))
    t = select(steps)
    assert t.source == ((0, 0), (1, 0), (0, 1), (1, 1)) and t.steps == 4 and t.top_k == 2
    assert [t.tokens(k) for k in range(4)] == [3, 3, 3, 2]
    assert t.step(3).tolist() == [[2, 1], [0, 3]] and t.max_expert == 3
    t = select(steps, layers=[1], max_steps=1, max_tokens=2)
    assert t.source == ((1, 0),) and t.step(0).tolist() == [[3, 2], [3, 1]]
    with pytest.raises(TraceError, match=r"layer\(s\) \[5\] are not in the trace"):
        select(steps, layers=[5])


@pytest.mark.parametrize("change,needle", [
    (lambda a: a.__setitem__((0, 1, 2), [3, 3]), "layer 0, step 1, token 2: routed twice to expert 3"),
    (lambda a: a.__setitem__((1, 0, 0), [-2, 1]), "layer 1, step 0, token 0: negative expert id"),
])
def test_bad_routes_name_layer_step_and_token(tmp_path, change, needle):
    a = EXPERTS.copy()
    change(a)
    with pytest.raises(TraceError, match=needle):
        read_routing(_npz(tmp_path, a))


def test_bad_files_are_refused(tmp_path):
    with pytest.raises(TraceError, match="must be integers of shape"):
        read_routing(_npz(tmp_path, EXPERTS.astype(float)))
    np.savez(tmp_path / "x.npz", routes=EXPERTS)
    with pytest.raises(TraceError, match="no array 'experts'"):
        read_routing(tmp_path / "x.npz")
    cols = _long_form()
    cols = {k: v[1:] for k, v in cols.items()}  # the first token goes to one expert only
    pq.write_table(pa.table(cols), tmp_path / "r.parquet")
    with pytest.raises(TraceError, match="token 1 goes to 2 experts; the first token to 1"):
        read_routing(tmp_path / "r.parquet")
    pq.write_table(pa.table({"layer": [0], "step": [0], "token": [0]}), tmp_path / "m.parquet")
    with pytest.raises(TraceError, match="missing column"):
        read_routing(tmp_path / "m.parquet")
    with pytest.raises(TraceError, match="expected a .npz or .parquet"):
        read_routing(_npz(tmp_path).rename(tmp_path / "r.csv"))


def test_measured_skew_and_imbalance_have_their_closed_forms():
    ranks = np.arange(1, 9, dtype=float)
    for s in (0.0, 0.7, 1.3):
        counts = 1e6 * ranks ** -s  # an exact Zipf law: the fitted exponent is s
        assert skew_of(np.random.default_rng(1).permutation(counts)) == pytest.approx(s, abs=1e-12)
    assert np.isnan(skew_of(np.array([5, 0, 0])))
    # step 1: busiest 6 of mean 3 -> 2; step 2: uniform -> 1
    assert imbalance_of([np.array([6, 2, 1, 3]), np.array([2, 2, 2, 2])]) == pytest.approx(1.5)


def _moe(trace, **extra):
    return {"memory": {"reclaim": "partial-free"}, "workload": {"kind": "moe", "moe": {
        "trace": str(trace), "steps": 0, "tokens": 0, "experts": 4, "top_k": 2, "producers": 2, "hidden": 128,
        "expert_ffn": 64, **extra}}}


def test_a_run_replays_the_routes_and_reports_their_skew(tmp_path):
    done = run(_moe(_npz(tmp_path)))
    s, t = done.summary, done.tables
    assert s["completed"] and s["requests"] == 4 and s["tokens"] == 11
    assert s["messages"]["reference"] == 11 * 2 and s["leaks"] == 0
    # an expert's input buffer holds exactly the tokens the trace routed to it in that step
    labels = np.array(t["buffers"]["label"])
    sizes = sorted(int(p) for p, lab in zip(t["buffers"]["peak_bytes"], labels) if lab == "expert-input")
    steps = [EXPERTS[lyr, st][(EXPERTS[lyr, st] >= 0).all(axis=1)] for st in range(2) for lyr in range(2)]
    counts = [np.bincount(e.ravel(), minlength=4) for e in steps]
    assert sizes == sorted(int(c) * 128 * 2 for step in counts for c in step if c)
    total = np.sum(counts, axis=0)  # experts 0..3 got 6, 5, 5, 6 tokens
    assert s["moe_skew_measured"] == pytest.approx(skew_of(total)) and s["moe_load_imbalance"] == pytest.approx(
        imbalance_of(counts))


def test_twice_the_steps_twice_the_energy(tmp_path):
    once = run(_moe(_npz(tmp_path))).summary
    twice = run(_moe(_npz(tmp_path, np.concatenate([EXPERTS, EXPERTS], axis=1), "r2.npz"))).summary
    assert twice["tokens"] == 2 * once["tokens"]
    assert twice["energy_joules"] / once["energy_joules"] == pytest.approx(2.0, rel=0.01)


def test_trace_and_config_must_agree(tmp_path):
    from cluster.config.loader import ConfigError

    with pytest.raises(ConfigError) as err:
        run(_moe(_npz(tmp_path), top_k=1))
    assert "workload.moe.top_k: is 1; the trace routes every token to 2 experts" in str(err.value)
    with pytest.raises(ConfigError) as err:
        run(_moe(_npz(tmp_path), experts=3))  # the trace routes to experts 0..3
    assert "workload.moe.experts: is 3; " in str(err.value) and "expert 3 is out of range" in str(err.value)


def test_shipped_routing_trace_reads(tmp_path):
    steps = read_routing(ROOT / "examples" / "traces" / "moe_routing_sample.npz")
    assert len(steps) == 4 * 8 and all(40 <= len(e) <= 64 and e.shape[1] == 2 for e in steps.values())
    t = select(steps, layers=[2])  # the layer drawn with Zipf exponent 1.2 over 8 experts
    counts = np.bincount(t.routes.ravel(), minlength=8)
    assert skew_of(counts) > skew_of(np.bincount(select(steps, layers=[0]).routes.ravel(), minlength=8))


def _convert(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, str(ROOT / "examples" / "traces" / "convert_routing.py"), *map(str, args)],
                          capture_output=True, text=True)


def test_step_artifact_files_convert_to_exactly_their_routes(tmp_path):
    src = tmp_path / "step"
    src.mkdir()
    files = {(10, 8): [[0, 1], [2, 3], [1, 0]], (10, 9): [[7, 1], [2, 3]], (12, 8): [[5, 4]]}
    for (layer, it), data in files.items():
        np.savez(src / f"{it:03d}_{layer:03d}.npz", data=np.array(data))  # the artifact's NNN_LLL: iteration, layer
    out = tmp_path / "t.npz"
    done = _convert("step", src, "--out", out)
    assert done.returncode == 0, done.stderr
    assert "layers [10, 12] -> 0..1; iterations [8, 9] -> steps 0..1" in done.stdout
    assert "3 (layer, step) pairs, 6 routed tokens" in done.stdout  # layer 12 has no iteration 9: not a pair
    got = read_routing(out)
    assert {k: v.tolist() for k, v in got.items() if len(v)} == {(0, 0): files[(10, 8)], (0, 1): files[(10, 9)],
                                                                  (1, 0): files[(12, 8)]}
    t = select(got)  # layer 1 has no step 1: three steps, not four
    assert t.source == ((0, 0), (1, 0), (0, 1)) and [t.tokens(k) for k in range(3)] == [3, 1, 2]
    np.savez(src / "010_010.npz", data=np.array([[1, 1]]))
    done = _convert("step", src, "--out", out)
    assert done.returncode == 2 and "010_010.npz, token 0: routed twice to expert 1" in done.stderr
    (src / "010_010.npz").rename(src / "iter_010_layer_010.npz")
    done = _convert("step", src, "--out", out)
    assert done.returncode == 2 and "iter_010_layer_010.npz: expected a name ITERATION_LAYER.npz" in done.stderr
    done = _convert("step", tmp_path / "none", "--out", out)
    assert done.returncode == 2 and "none does not exist" in done.stderr and "Traceback" not in done.stderr


# the STeP artifact (stanford-ppl/step_artifact) as published: one routing file per model and batch,
# dyn_tiling/expert_routing/<model>_b<batch>/<iteration>_<layer>.npz, array "data" [batch, top_k]
PUBLISHED = {"mixtral_b64/008_010.npz": (64, 2, 8), "mixtral_b1024/019_009.npz": (1024, 2, 8),
             "qwen_b64/032_012.npz": (64, 8, 128), "qwen_b1024/022_016.npz": (1024, 8, 128)}
# Mixtral's full batch sends ~256 tokens x hidden to one expert: more than a plasticine MU (issue 20, item 6)
NO_MU_HOLDS = {"mixtral_b1024/019_009.npz"}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_published_step_files_convert_and_the_example_replays_them(tmp_path, name):
    from cluster.config import ConfigError, load
    from cluster.config.run import RUN_SCHEMA, chip_config

    batch, k, experts = PUBLISHED[name]
    rng = np.random.default_rng(3)
    data = np.argsort(rng.random((batch, experts)), axis=1)[:, :k].astype(np.int64)  # k distinct experts each
    path = tmp_path / "dyn_tiling" / "expert_routing" / name
    path.parent.mkdir(parents=True)
    np.savez(path, data=data)
    for source in (path.parent, path):  # the directory or the one file
        done = _convert("step", source, "--out", tmp_path / "t.npz")
        assert done.returncode == 0, done.stderr
        it, layer = (int(x) for x in path.stem.split("_"))
        assert f"layers [{layer}] -> 0..0; iterations [{it}] -> steps 0..0" in done.stdout
        assert f"1 (layer, step) pairs, {batch:,} routed tokens" in done.stdout
    # a single-layer trace replays under the example as it is, with the model's experts and top_k
    cfg = load(RUN_SCHEMA, str(ROOT / "examples" / "moe_trace.toml"), [
        f"workload.moe.trace={tmp_path / 't.npz'}", f"workload.moe.top_k={k}", f"workload.moe.experts={experts}"])
    if name in NO_MU_HOLDS:  # the full batch routes a step no MU of the example's chip can hold: refused up front
        with pytest.raises(ConfigError) as err:
            chip_config(cfg)
        assert "larger than an MU can hold" in "".join(str(i) for i in err.value.issues)
        return
    trace = chip_config(cfg).workload.trace
    assert trace.steps == 1 and trace.source == ((0, 0),) and trace.step(0).tolist() == data.tolist()


def test_the_example_replays_its_trace_and_prints_the_measured_skew(capsys):
    from cluster.cli import main

    assert main(["run", str(ROOT / "examples" / "moe_trace.toml"), "--set", "workload.moe.steps=2"]) == 0
    out = capsys.readouterr().out
    steps = read_routing(ROOT / "examples" / "traces" / "moe_routing_sample.npz")
    t = select(steps, max_steps=2)  # every layer of the trace: step 0's layers 0 and 1
    counts = [np.bincount(t.step(k).ravel(), minlength=8) for k in range(2)]
    assert f"measured Zipf skew {skew_of(np.sum(counts, axis=0)):.3f}" in out
    assert f"{sum(t.tokens(k) for k in range(2))} routed tokens" in out


def test_a_replayed_trace_gives_one_result_for_any_shard_count(tmp_path):
    raw = _moe(_npz(tmp_path))
    one = run(raw).summary["result_hash"]
    assert run(raw, shards=2).summary["result_hash"] == one == run(raw, shards=4, cut="cols").summary["result_hash"]


def test_a_trace_step_whose_expert_input_no_mu_can_hold_is_refused_before_the_run(tmp_path):
    """One step of 40 tokens all routed to expert 0: its input buffer is 40 x 128 x 2 B =
    10,240 B, more than an 8 KiB MU holds; replaying its first 32 tokens (8,192 B) fits."""
    from cluster.config.loader import ConfigError

    hot = np.zeros((1, 40, 1), dtype=np.int16)
    raw = {**_moe(_npz(tmp_path, hot), top_k=1, experts=2),
           "chip": {"preset": "plasticine", "rows": 4, "cols": 8, "mu_bytes": "8KiB"}}
    raw["memory"].update(policy="virtual", block_bytes="1KiB")
    with pytest.raises(ConfigError) as err:
        run(raw)
    text = str(err.value) + "".join(str(i) for i in getattr(err.value, "issues", []))
    assert "workload.moe.trace" in text and "routes 40 tokens to expert 0" in text
    assert "input buffer of 10,240 B is larger than an MU can hold (8,192 B" in text
    raw["workload"]["moe"]["tokens"] = 32
    s = run(raw).summary
    assert (s["status"], s["tokens"]) == ("completed", 32)

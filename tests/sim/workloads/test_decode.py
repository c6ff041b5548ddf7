"""kv-decode and spec-decode: token counts, buffer growth and message counts by hand."""

import pytest

from sim.serving.lengths import Dist
from tests.sim.chip.chiprun import run

P, OUT = 20, 5  # prompt and output tokens of every sequence
TOKEN = 64 * 2  # head_dim x dtype bytes


def _kv(kind="kv-decode", **decode):
    return {"workload": {"kind": kind, "decode": {
        "requests": 5, "max_batch": 3, "layers": 2, "heads": 1, "head_dim": 64, "dtype_bytes": 2,
        "prompt_tokens": {"dist": "fixed", "mean": P}, "output_tokens": {"dist": "fixed", "mean": OUT}, **decode}}}


def test_kv_decode_generates_every_token_and_frees_every_buffer():
    done = run(_kv())
    s, t = done.summary, done.tables
    assert s["completed"] and s["requests"] == 5 and s["tokens"] == 5 * OUT and s["token_unit"] == "generated tokens"
    assert s["leaks"] == 0 and s["use_after_free"] == 0
    b = t["buffers"]
    assert len(b["alloc"]) == 5 * 4 and set(b["label"]) == {"kv"}
    # the prefill makes the first token; each of the OUT - 1 steps appends one token
    assert set(b["peak_bytes"]) == {(P + OUT - 1) * TOKEN}
    assert s["messages"]["append"] == 5 * 4 * OUT  # the prompt, then one per step
    assert s["messages"]["read_request"] == 5 * 4 * OUT  # attention reads every buffer every step
    assert s["messages"]["free"] == 5 * 4


def test_spec_decode_with_full_acceptance_never_truncates():
    done = run(_kv("spec-decode", draft=3, accept=1.0))
    s, t = done.summary, done.tables
    assert s["completed"] and s["tokens"] == 5 * OUT and s["messages"]["truncate"] == 0
    # after the prefill, steps of draft + 1 = 4 tokens: ceil((OUT - 1) / 4) = 1 step of 4
    assert set(t["buffers"]["peak_bytes"]) == {(P + 4) * TOKEN}


def test_spec_decode_with_no_acceptance_truncates_every_draft():
    done = run(_kv("spec-decode", draft=3, accept=0.0))
    s, t = done.summary, done.tables
    assert s["completed"] and s["tokens"] == 5 * OUT
    steps = OUT - 1  # each step keeps only the bonus token
    assert s["messages"]["truncate"] == 5 * 4 * steps
    # every step grows by 4 and is truncated back by 3: the peak is the last step's
    assert set(t["buffers"]["peak_bytes"]) == {(P + OUT - 2 + 4) * TOKEN}


def test_virtual_copies_nothing_where_realloc_copy_moves_buffers():
    base = _kv(requests=3, max_batch=3)
    base["workload"]["decode"]["output_tokens"] = {"dist": "fixed", "mean": 40}
    virt = run({**base, "memory": {"policy": "virtual", "block_bytes": "1KiB"}}).summary
    real = run({**base, "memory": {"policy": "realloc-copy", "initial_bytes": "1KiB", "growth": 2.0}}).summary
    assert virt["bytes_copied"] == 0 and real["bytes_copied"] > 0
    # a realloc-copy buffer ends in a power-of-two region: (20 + 39) x 128 B -> 8 KiB
    assert real["peak_mu_reserved"] > virt["peak_mu_reserved"]
    assert virt["tokens"] == real["tokens"] == 3 * 40


def test_static_single_fits_one_buffer_per_mu_and_serialises_sequences():
    base = _kv(requests=8, max_batch=8)  # 32 KV buffers on 16 MUs
    single = run({**base, "memory": {"policy": "static-single"}}).summary
    multi = run({**base, "memory": {"policy": "static-multi", "buffers_per_mu": 8}}).summary
    assert single["completed"] and multi["completed"]
    assert single["stalls"] > 0 and multi["stalls"] == 0  # sequences wait for a whole MU
    assert single["sim_cycles"] > multi["sim_cycles"]


@pytest.mark.parametrize("dist", [Dist("uniform", 0, 10, 20), Dist("lognormal", 100, 1, 10_000, 0.5)])
def test_length_distributions(dist):
    xs = sorted(dist.draw(7, 201, i) for i in range(2001))
    assert dist.lo <= xs[0] and xs[-1] <= dist.hi
    if dist.kind == "uniform":
        assert set(xs) == set(range(10, 21))
    else:
        assert 90 <= xs[1000] <= 110  # the median is mean


def test_the_draft_keys_are_spec_decode_s_own():
    """spec-decode declares draft and accept beside kv-decode's keys: kv-decode refuses them, naming
    who reads them, instead of ignoring them."""
    from cluster.config import ConfigError, load
    from cluster.config.run import RUN_SCHEMA

    with pytest.raises(ConfigError) as err:
        load(RUN_SCHEMA, raw=_kv(draft=3, accept=0.5))
    assert err.value.details == [f"workload.decode.{k}: the kv-decode workload does not read this key "
                                 "(read by spec-decode)" for k in ("draft", "accept")]
    load(RUN_SCHEMA, raw=_kv("spec-decode", draft=3, accept=0.5))  # spec-decode reads them

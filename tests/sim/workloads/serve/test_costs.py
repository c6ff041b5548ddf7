"""Which anchor prices a step: a compute-bound step's few cached K/V do not make an anchor of their own.

Known answer from Llama-3.1-8B's published dimensions (hidden 4,096, 32 heads and 8 KV heads of 128,
FFN 14,336, bf16): a layer's weights are 218.1 M parameters, 436.2 MB, and a cached token's K and V a
layer 2 x 8 x 128 x 2 = 4,096 bytes, so with context ratio 16 a compute-bound anchor reading fewer than
436.2 MB / 16 / 4,096 B = 6,656 cached tokens a layer is priced as the one reading none.
"""

from __future__ import annotations

from mapping.models import model_preset
from sim.workloads.serve.costs import StepCosts
from sim.workloads.serve.shapes import StepShape
from tests.sim.chip.chiprun import config

LAYER_WEIGHTS = (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336) * 2  # bytes: q, o, k, v, gate, up, down
KV_TOKEN = 2 * 8 * 128 * 2  # bytes a cached token's K and V take a layer


def _costs() -> StepCosts:
    cfg = config({"chip": {"preset": "sn40l"}, "memory": {"policy": "virtual"},
                  "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}}, "run": {"max_cycles": 10**12}})
    return StepCosts(cfg, model_preset("llama-3.1-8b"))


def test_the_threshold_is_a_sixteenth_of_the_layers_weights():
    assert LAYER_WEIGHTS == 436_207_616 and LAYER_WEIGHTS // 16 // KV_TOKEN == 6656


def test_a_prompt_beside_a_few_decode_contexts_is_priced_by_the_prompts_anchor():
    c = _costs()
    # 1,024 prompt tokens and one decode sequence of 2,000 cached: 2 cached tokens a token, 1 after rounding
    step = StepShape.of([2000], [(1023, 0, True)])
    assert c.anchor_of(step) == StepShape(1024, 1024 * 256, 0)
    # 4,096 prompt tokens beside 4,096 cached (4,096 x 4 KiB = 16.8 MB, under 27.3 MB): none
    assert c.anchor_of(StepShape(4096, 4096 * 4096, 4096)) == StepShape(4096, 4096 * 4096, 0)


def test_many_cached_tokens_or_a_memory_bound_step_keep_their_own_anchor():
    c = _costs()
    # 16,384 cached tokens (67 MB a layer, over a sixteenth of the weights) beside 1,024 prompt tokens
    assert c.anchor_of(StepShape(1024, 1024 * 256, 16384)) == StepShape(1024, 1024 * 256, 16384)
    # batch-1 decode is memory-bound: its 4,096 cached tokens (1 % of its bytes) keep their anchor
    assert c.anchor_of(StepShape(1, 4096, 4095)) == StepShape(1, 4096, 4096)

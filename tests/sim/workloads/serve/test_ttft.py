"""A serve run's TTFT in three: queueing (arrival to first admission), prefill (the steps that
prefilled the request) and interference (the rest, up to its first token: other requests' steps).

Known answers: the parts add up to the TTFT for every request, in whole cycles; a hand-built
case: two requests arrive at once, the second's 16-token prompt too large for the step budget
(9 tokens) beside the first's decode, so it is admitted with the first but prefilled only once
the first has made its 10 tokens: its prefill is that one step, its interference every step of
the first before it; the first's prefill is its own first step.
"""

from __future__ import annotations

import pytest

from sim.serving.metrics import RequestLog
from sim.workloads.serve.figures import StepLog
from tests.sim.chip.chiprun import listed, run
from tests.sim.workloads.serve.test_scheduler import logged, serve, trace_file


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    path = trace_file(tmp_path_factory.mktemp("trace"), [(0, 8, 10), (0, 16, 2)])
    return run(serve(path, max_step_tokens=9, max_sequences=2))


def test_the_parts_add_up_to_the_ttft_in_whole_cycles(done):
    s, r = done.summary, listed(done.tables["requests"])
    clock = s["sim_cycles"] / s["sim_seconds"]
    for i in range(2):
        parts = [r[k][i] for k in ("queueing_seconds", "prefill_seconds", "interference_seconds")]
        assert all(x >= 0 for x in parts)
        assert round(sum(parts) * clock) == round(r["ttft_seconds"][i] * clock)
        assert sum(parts) == pytest.approx(r["ttft_seconds"][i], rel=1e-12)


def test_a_prompt_held_back_by_the_step_budget_waits_in_interference(done):
    steps, reqs = logged(done, StepLog), logged(done, RequestLog)
    assert [(x.decode, x.prefill_tokens) for x in steps] == [(0, 8)] + [(1, 0)] * 9 + [(0, 16), (1, 0)]
    a, b = reqs
    assert a.admitted == b.admitted and a.token_cycles[0] == steps[0].end and b.token_cycles[0] == steps[10].end
    r = listed(done.tables["requests"])
    clock = done.summary["sim_cycles"] / done.summary["sim_seconds"]
    cycles = {k: [round(x * clock) for x in r[k]] for k in ("queueing_seconds", "prefill_seconds",
                                                             "interference_seconds")}
    assert cycles["queueing_seconds"] == [a.admitted, b.admitted]  # both arrived at 0
    assert cycles["prefill_seconds"] == [steps[0].end - steps[0].start, steps[10].end - steps[10].start]
    assert cycles["interference_seconds"] == [steps[0].start - a.admitted, steps[10].start - b.admitted]
    assert steps[10].start - b.admitted >= sum(x.end - x.start for x in steps[:10])  # the first's ten steps
    assert r["prompt_tokens"] == [8, 16] and done.summary["prompt_tokens"] == 24

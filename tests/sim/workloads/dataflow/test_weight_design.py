"""The weight design by static analysis against a simulated partial-free run of the same plan:
the predicted field never borrows, one bit fewer does, and the references the run counts are
the ones the analysis counted."""

import dataclasses
from collections import Counter

import numpy as np
import pytest

from allocators.weight_bits import copies_without_borrow
from allocators.weights import STRATEGIES
from cluster.jobs.chip import simulate_chip
from mapping.graph import Kernel
from mapping.placement import place_on_grid
from sim.memory import oracle
from sim.workloads.dataflow import DataflowParams, PlannedDataflow, plan_addresses
from sim.workloads.dataflow.compile import stripe_holders
from sim.workloads.dataflow.sharing import design_of, min_weight_bits
from tests.sim.chip.chiprun import config
from tests.sim.workloads.dataflow.harness import EW, GW, chain, plan_of

MAX_CUS = 6  # a GEMM on 6 CUs reads its input whole: its stripes go to 6 readers and their writer


def _raw(split: str, bits: int) -> dict:
    return {"chip": {"preset": "plasticine"},
            "memory": {"reclaim": "partial-free", "split": split, "weight_bits": bits}}


@pytest.fixture(scope="module")
def planned():
    g = chain([Kernel("a", EW, 2048, 1, 256), Kernel("b", GW, 512, 2048, 256), Kernel("c", EW, 512, 1, 256)])
    plan = plan_of(g, 256, 32)
    cfg = config(_raw("halve", 8))  # the reclamation protocol does not change an MU's room
    placement = plan_addresses(place_on_grid(plan, cfg.spec, 0, cfg.policy.room(cfg.mu), max_cus=MAX_CUS),
                               cfg.spec.mu_bytes)
    return PlannedDataflow(plan, placement)


def _fan_outs(planned: PlannedDataflow) -> list[int]:
    """The CUs each stripe's reference is copied to in the compiled program, stripe by stripe."""
    parts = DataflowParams.from_plan(planned.plan, planned.placement, config(_raw("halve", 8)).spec).partitions
    return [len(h) for part in parts for h in stripe_holders(part).values()]


def _run(planned: PlannedDataflow, split: str, bits: int):
    cfg = config(_raw(split, bits))
    params = DataflowParams.from_plan(planned.plan, planned.placement, cfg.spec)
    return simulate_chip(dataclasses.replace(cfg, workload=params))


def test_the_fan_outs_are_the_placed_readers_and_writer(planned):
    design = design_of(planned)
    by_name = {b.buffer: b for b in design.buffers}
    # a->b: written by one CU of a, read whole by all of b's CUs (a GEMM)
    assert by_name["a->b"].shared_references == MAX_CUS + 1
    # b->c: its writer and the elementwise CU reading that share
    assert by_name["b->c"].shared_references == 2
    # the weight (loaded by DRAM: no writer CU): 9 stripes over the 6 GEMM CUs' equal slices, so
    # a stripe straddles at most one slice boundary
    w = by_name["weight:b"]
    assert (w.stripes, w.shared_references) == (9, 2)
    assert design.shared_references == MAX_CUS + 1


@pytest.mark.parametrize("split", STRATEGIES)
def test_the_predicted_field_never_borrows_and_one_bit_fewer_does(planned, split):
    design = design_of(planned)
    bits = min_weight_bits(planned, split)
    assert bits == design.min_bits(split) and bits - 1 >= {"halve": 2, "one": 2, "log2": 1}[split]
    s = _run(planned, split, bits).summary
    assert s["completed"] and s["premature_free"] == 0 and s["leaks"] == 0
    assert s["weight_topups"] == 0 and s["messages"]["weight_request"] == 0
    s = _run(planned, split, bits - 1).summary
    assert s["completed"] and s["premature_free"] == 0 and s["leaks"] == 0
    assert s["weight_topups"] > 0
    # one weight request per stripe whose fan-out is past what the narrower field gives unaided
    wide = copies_without_borrow(bits - 1, split)
    assert s["messages"]["weight_request"] == sum(n > wide for n in _fan_outs(planned)) > 0


def test_the_references_the_run_counts_are_the_ones_the_analysis_counts(planned):
    done = _run(planned, "halve", min_weight_bits(planned, "halve"))
    log = oracle.merge_logs([r.oracle_log for r in done.simulation.outcome.reports])
    ev, alloc = log[:, oracle.COLUMNS.index("event")], log[:, oracle.COLUMNS.index("alloc")]
    copies = Counter(alloc[ev == oracle.COPY].tolist())
    allocated = alloc[ev == oracle.ALLOC].tolist()
    counted = sorted(copies.get(a, 0) for a in allocated)  # every allocation: the copies of its reference
    assert counted == sorted(_fan_outs(planned))
    # alive at once: the allocating controller's reference and every copy, before it drops its own
    step = np.select([ev == oracle.ALLOC, ev == oracle.COPY, ev == oracle.DROP], [1, 1, -1], 0)
    most = max(int(np.cumsum(step[alloc == a]).max()) for a in set(allocated))
    assert most == design_of(planned).shared_references + 1


def test_a_plan_without_a_grid_or_an_unknown_split_is_refused(planned):
    with pytest.raises(ValueError, match="split strategy 'third'"):
        min_weight_bits(planned, "third")
    sn30 = dataclasses.replace(planned.plan, chip="SN30")
    with pytest.raises(ValueError, match="no grid placement"):
        min_weight_bits(sn30, "halve")

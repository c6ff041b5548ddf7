"""The planning step alone (plan_for): a plan read, placed and given MU addresses without
simulating it, checked against the invariants an address plan must keep."""

import json

import pytest

from cluster.jobs.plan import plan_file
from mapping.chips import RDA_PRESETS
from mapping.graph import Kernel
from mapping.placement import MuRoom
from sim.workloads.dataflow import DataflowParams, PlannedDataflow, plan_for
from tests.sim.workloads.dataflow.harness import EW, GG, GW, chain, plan_of

SPEC = RDA_PRESETS["plasticine"]
ALIGNMENT = 64  # plan_addresses' default


def _table(**values) -> dict:
    """A resolved [workload.dataflow] table: the declared defaults, then ``values``."""
    return {**{k: f.default for k, f in DataflowParams.KEYS.fields.items()}, **values}


@pytest.fixture(scope="module")
def plan():
    kernels = [Kernel("w", GW, 256, 512, 64), Kernel("g", GG, 256, 256, 64), Kernel("e", EW, 256, 1, 64)]
    return plan_of(chain(kernels), 64, 16)


def _write(tmp_path, content: dict) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(content))
    return str(path)


def test_every_stripe_gets_an_aligned_address_and_no_two_live_together_overlap(plan, tmp_path):
    planned = plan_for(_table(plan=_write(tmp_path, {"plan": plan.to_dict()})), SPEC)
    assert isinstance(planned, PlannedDataflow) and planned.plan == plan
    room = planned.placement.room
    caches = [st for c in planned.placement.caches for st in c.stripes]  # live through every partition
    stripes = 0
    for part in planned.placement.partitions:
        live: dict[int, list[tuple[int, int]]] = {}
        for st in [*(st for buf in part.buffers for st in buf.stripes), *caches]:
            assert st.address >= 0 and st.address % ALIGNMENT == 0
            live.setdefault(st.mu, []).append((st.address, st.address + room.reserve(st.bytes)))
            stripes += 1
        for spans in live.values():
            spans.sort()
            assert spans[-1][1] <= SPEC.mu_bytes
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert stripes > 0


def test_a_stored_placement_is_used_when_its_room_and_seed_match(plan, tmp_path):
    stored = plan_file(plan)  # `rdasim map`'s plan.json: placed for the virtual policy, seed 0
    room = MuRoom(**stored["placement"]["room"])
    stored["placement"]["partitions"][0]["traffic"] = -1.0  # a mark no placement search gives
    path = _write(tmp_path, stored)
    assert plan_for(_table(plan=path), SPEC, room).placement.partitions[0].traffic == -1.0
    assert plan_for(_table(plan=path, placement_seed=1), SPEC, room).placement.partitions[0].traffic >= 0
    assert plan_for(_table(plan=path), SPEC, MuRoom(SPEC.mu_bytes, 1)).placement.partitions[0].traffic >= 0


def test_a_plan_for_more_chips_than_the_run_has_is_refused(plan, tmp_path):
    data = plan.to_dict()
    data["chips"] = 2
    with pytest.raises(ValueError, match="the plan is for 2 chips; this run has 1"):
        plan_for(_table(plan=_write(tmp_path, {"plan": data})), SPEC)

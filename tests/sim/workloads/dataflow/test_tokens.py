"""What a mapped run's tokens are: the plan's unit of work per graph pass (a decode step's
generated tokens, a sequence's prompt tokens), not the passes; hand counts and metamorphic
relations (twice the batch, twice the passes, another tiling)."""

import json

import pytest

from mapping.chips import RDA_PRESETS
from mapping.generators.decode import decode_workload
from mapping.generators.dlrm import dlrm_workload
from mapping.generators.fft import fft_workload
from mapping.generators.hpl import hpl_workload
from mapping.generators.llm import llm_workload
from mapping.generators.moe import moe_workload
from mapping.kernel_costs import ExecutionModel
from mapping.plan import MappingPlan
from mapping.solver import map_workload
from mapping.systems import LinkKind, NetworkDim, Parallelism, System
from tests.sim.workloads.dataflow.harness import run_plan

SPEC = RDA_PRESETS["plasticine"]
ONE_CHIP = System(1, SPEC.dfmodel(), (NetworkDim(LinkKind.RING, 1, 1.0, Parallelism.TP),))


def _run(workload, passes: int) -> dict:
    plan = map_workload(workload, ONE_CHIP, ExecutionModel(), time_limit=20)
    assert plan.feasible, plan.reason
    s = run_plan(plan, {"memory": {"policy": "virtual"}}, passes=passes).summary
    assert s["status"] == "completed", s["status_detail"]
    return s


def _decode(batch: int):
    return decode_workload(64, 2, 32, batch, 1, tile_size=2, name="decode")


def _prompt(tile: int = 8):
    return llm_workload(64, 2, 32, 1, 1, 1, tile_size=tile, name="prefill")


@pytest.mark.parametrize("batch", [2, 4])
def test_a_decode_step_generates_a_token_per_sequence(batch):
    """batch 8 and 4 steps is 32 generated tokens, not 4; energy per token is per generated token."""
    s = _run(_decode(batch), passes=3)
    assert (s["tokens"], s["token_unit"]) == (3 * batch, "generated tokens")
    assert s["energy_per_token_joules"] == pytest.approx(s["energy_joules"] / (3 * batch), rel=1e-12)
    assert s["energy_per_batch_joules"] == pytest.approx(s["energy_joules"] / 3, rel=1e-12)  # per step
    assert s["tokens_per_second"] == pytest.approx(3 * batch / s["sim_seconds"], rel=1e-12)


def test_twice_the_batch_is_twice_the_tokens_and_no_more_energy_per_token():
    """The weights are read once a step however many sequences share it: energy per token never rises."""
    one, two = _run(_decode(2), passes=2), _run(_decode(4), passes=2)
    assert two["tokens"] == 2 * one["tokens"]
    assert two["energy_per_token_joules"] <= one["energy_per_token_joules"]


def test_twice_the_passes_of_a_sequence_is_twice_its_prompt_tokens_at_the_same_energy_each():
    """A prefill pass is one sequence of 32 tokens; passes repeat the same work."""
    one, two = _run(_prompt(), passes=1), _run(_prompt(), passes=2)
    assert (one["tokens"], two["tokens"], one["token_unit"]) == (32, 64, "prompt tokens")
    assert two["energy_per_token_joules"] == pytest.approx(one["energy_per_token_joules"], rel=1e-6)


def test_the_tokens_of_a_sequence_do_not_depend_on_how_it_is_tiled():
    assert _run(_prompt(8), passes=1)["tokens"] == _run(_prompt(16), passes=1)["tokens"] == 32


def test_every_generator_says_what_a_graph_pass_processes():
    assert (_decode(8).pass_units, _decode(8).units_per_pass) == ("generated tokens", 8)
    assert (_prompt().pass_units, _prompt().units_per_pass) == ("prompt tokens", 32)
    train = llm_workload(64, 2, 32, 1, 1, 1, training=True)
    assert (train.pass_units, train.units_per_pass) == ("training tokens", 32)
    moe = moe_workload(64, 2, 48, 4, 2, 1, 1)
    assert (moe.pass_units, moe.units_per_pass) == ("prompt tokens", 48)
    dlrm = dlrm_workload(64, 1, 1, 2, 2, 8, 100, 16, 64)
    assert (dlrm.pass_units, dlrm.units_per_pass) == ("training samples", 16)
    hpl = hpl_workload(256, 32, 3)
    assert (hpl.pass_units, hpl.units_per_pass) == ("panel steps", 3)
    assert (fft_workload(1024, 2).pass_units, fft_workload(1024, 2).units_per_pass) == ("transforms", 1)
    # a graph of one layer of a four-layer model: a pass takes its tokens through a quarter of it
    deep = decode_workload(64, 2, 32, 8, 4)
    assert (deep.pass_units, deep.units_per_pass) == ("generated tokens (through 1 of 4 layers)", 8)


def test_a_plan_written_before_it_said_its_unit_counts_graph_passes():
    plan = map_workload(_decode(4), ONE_CHIP, ExecutionModel(), time_limit=20)
    assert (plan.pass_unit, plan.units_per_pass) == ("generated tokens", 4)
    assert MappingPlan.from_dict(plan.to_dict()) == plan
    old = {k: v for k, v in plan.to_dict().items() if k not in ("pass_unit", "units_per_pass")}
    assert (MappingPlan.from_dict(old).pass_unit, MappingPlan.from_dict(old).units_per_pass) == ("graph passes", 1)


DECODE_TOML = """
[chip]
preset = "plasticine"
[memory]
policy = "virtual"
[workload]
kind = "dataflow"
[workload.dataflow]
passes = 3
[workload.dataflow.graph]
kind = "decode"
[workload.dataflow.graph.decode]
hidden = 64
heads = 2
context = 32
batch = 4
layers = 1
tile_size = 2
[workload.dataflow.mapping]
time_limit = "20s"
"""


def test_the_run_summary_names_its_unit_and_shows_simulated_beside_dfmodel_time(tmp_path, capsys):
    from cluster.cli import main

    path = tmp_path / "decode.toml"
    path.write_text(DECODE_TOML)
    assert main(["run", str(path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "12 generated tokens, " in text and " generated tokens/s;" in text and "J per generated token)" in text
    assert "seconds per graph pass: simulated " in text and ", DFModel " in text
    assert main(["run", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["tokens"], got["token_unit"]) == (12, "generated tokens")
    assert got["seconds_per_pass_simulated"] > 0 and got["seconds_per_pass_analytic"] > 0

"""`rdasim map` end to end: presets, config files, overrides, errors, infeasible problems, outputs."""

import json

import pytest

from cluster.cli import main
from cluster.config.map import resolve, to_problem
from cluster.results.reading import read_table
from mapping.presets import preset
from mapping.solver import solve
from tests.paths import EXAMPLES

KEYS = {"tp", "pp", "dp", "micro_batch", "seconds_per_batch", "utilization", "cost", "power",
        "solver_seconds", "gap", "status"}


def test_preset_json(capsys):
    assert main(["map", "--preset", "hpl-1m-h100", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out) and out["status"] == "optimal"
    assert out["seconds_per_batch"] == pytest.approx(0.5554852653978578, rel=1e-6)


def test_config_equals_preset_and_overrides_apply(tmp_path):
    cfg = resolve(None, ["mapping.all_reduce_passes=2"], "megatron-145b-a100")
    assert cfg["system"]["network"][0]["link_bandwidth"] == 600e9
    plan = solve(to_problem(cfg))
    assert plan.seconds_per_batch == pytest.approx(12.914280552921736, rel=1e-6)
    # a TOML file with units overriding the preset gives the same problem as the spec
    path = tmp_path / "m.toml"
    path.write_text('preset = "hpl-1m-h100"\n[mapping]\ntime_limit = "5s"\n')
    assert resolve(str(path))["mapping"]["time_limit"] == 5.0
    assert solve(to_problem(resolve(str(path)))).seconds_per_batch == \
        pytest.approx(solve(preset("hpl-1m-h100")).seconds_per_batch)


def test_bad_keys_exit_2_with_every_problem(capsys, tmp_path):
    assert main(["map", "--preset", "gpt3-1t-sn30", "--set", "mapping.partitons=3", "--set", "system.chips=x"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'mapping.partitions'" in err and "system.chips" in err
    assert main(["map"]) == 2
    assert main(["map", "--preset", "nope"]) == 2


def test_infeasible_config_names_the_constraint(capsys):
    # Megatron layer kernel by kernel with weight slicing disabled: FFN weights (151 MB shards) exceed 88 MB SRAM
    code = main(["map", "--preset", "megatron-145b-a100", "--set", "mapping.stream_weights=false", "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert code == 7 and out["status"] == "infeasible" and "SRAM capacity" in out["reason"]


def test_outputs_written(tmp_path):
    assert main(["map", "--preset", "gpt3-1t-4layer-2pp-sn30", "--out", str(tmp_path), "--quiet"]) == 0
    plan = read_table(tmp_path, "map_plan").to_pylist()[0]
    assert plan["tp"] == 8 and plan["status"] == "optimal" and plan["config_hash"]
    assert read_table(tmp_path, "map_kernels").num_rows == 18
    assert json.loads((tmp_path / "plan.json").read_text())["plan"]["pp"] == 2


def test_example_config_runs():
    cfg = resolve("examples/map_llm_sn40l.toml", ["mapping.time_limit=20s"])
    plan = solve(to_problem(cfg))
    assert plan.feasible and plan.tp * plan.pp == 64 and plan.gap <= 1e-3


@pytest.mark.parametrize("workload", [
    'kind = "moe"\n[workload.moe]\nhidden = 1024\nheads = 8\nseq = 256\nexperts = 8\ntop_k = 2\n'
    'layers = 4\nglobal_batch = 8\n',
    'kind = "decode"\n[workload.decode]\nhidden = 1024\nheads = 8\ncontext = 2048\nbatch = 16\nlayers = 4\n',
])
def test_new_generators_map_end_to_end(tmp_path, workload):
    path = tmp_path / "w.toml"
    path.write_text("[workload]\n" + workload + '[system]\nchips = 4\nchip = "sn40l-like"\n'
                    '[[system.network]]\nsize = 4\nlink_bandwidth = "100GB/s"\nparallelism = "TP"\n'
                    '[mapping]\npartitions = 3\ntime_limit = "10s"\n')
    plan = solve(to_problem(resolve(str(path))))
    assert plan.feasible and plan.tp == 4 and 0 < plan.utilization < 1
    assert plan.lower_bound_seconds <= plan.seconds_per_batch


PLASTICINE_LAYER = """
[workload]
kind = "llm"
[workload.llm]
hidden = 256
heads = 4
seq = 128
layers = 1
global_batch = 1
tile_size = 32
[system]
chips = 1
chip = "plasticine"
[[system.network]]
size = 1
link_bandwidth = "1GB/s"
parallelism = "TP"
[mapping]
time_limit = "10s"
"""


def test_map_reports_the_weight_design_of_a_grid_plan(tmp_path, capsys):
    from allocators.weight_bits import min_bits

    path = tmp_path / "m.toml"
    path.write_text(PLASTICINE_LAYER)
    assert main(["map", str(path), "--json", "--quiet", "--out", str(tmp_path / "out")]) == 0
    weights = json.loads(capsys.readouterr().out)["weights"]
    buffers = weights["buffers"]
    assert buffers and {"tiles", "weight"} <= {b["kind"] for b in buffers}
    # the plan-wide figures are the widest buffer's, and each split's field is the closed form's
    assert weights["shared_references"] == max(b["shared_references"] for b in buffers) > 1
    for b in [*buffers, weights]:
        assert b["min_bits"] == {s: min_bits(b["shared_references"], s) for s in ("halve", "one", "log2")}
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["weights"] == weights
    assert main(["map", str(path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"at most {weights['shared_references']} holders" in text and "halve" in text
    # a chip with no grid of its own has no weight design
    assert main(["map", "--preset", "hpl-1m-h100", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["weights"] is None


def test_a_partition_with_no_row_is_said_why(capsys):
    """mapping.partitions = 4 on a training graph: the optimum uses 0, 2 and 3; the table says why 1 has no row
   ."""
    assert main(["map", str(EXAMPLES / "map_llm_sn40l.toml"), "--set", "mapping.partitions=4", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split()[0] for line in out[out.index(next(x for x in out if x.lstrip().startswith("part"))) + 1:]
            if line.split() and line.split()[0].isdigit()]
    assert rows == ["0", "2", "3"]
    assert out[-1].startswith("partition 1 holds no kernel: the optimum leaves it empty (mapping.partitions = 4")
    assert "forward in 0, backward in 2-3" in out[-1]

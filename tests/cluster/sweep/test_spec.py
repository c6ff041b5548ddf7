"""Sweep specs: how axes expand into points, stable point ids, and bad specs rejected with every error."""

import itertools
import textwrap

import pytest

from cluster.cli import main
from cluster.config import ConfigError, config_hash
from cluster.config.noc import NOC_SCHEMA
from cluster.sweep.plan import plan_sweep
from tests.paths import EXAMPLES

HEAD = """
[sweep]
name = "s"
command = "noc"
[base]
noc.k = 4
"""


def _plan(tmp_path, body: str, head: str = HEAD):
    spec = tmp_path / "spec.toml"
    spec.write_text(textwrap.dedent(head) + textwrap.dedent(body))
    return plan_sweep(spec)


def test_axes_are_a_cartesian_product_in_spec_order(tmp_path):
    plan = _plan(tmp_path, """
        [axes]
        noc.rate = [0.1, 0.2, 0.3]
        "noc.traffic" = ["uniform", "neighbor"]
        run.seed = [1, 2]
    """)
    got = [(p.config["noc"]["rate"], p.config["noc"]["traffic"], p.config["run"]["seed"]) for p in plan.points]
    assert got == list(itertools.product([0.1, 0.2, 0.3], ["uniform", "neighbor"], [1, 2]))
    assert [p.index for p in plan.points] == list(range(12))
    assert all(p.config["noc"]["k"] == 4 for p in plan.points)  # the base applies to every point


def test_point_id_is_the_hash_of_the_keys_the_config_sets_away_from_their_defaults(tmp_path):
    plan = _plan(tmp_path, """
        [axes]
        noc.rate = [0.25]
        noc.link_latency = ["2"]
        noc.vcs = [DEFAULT_VCS]
    """.replace('"2"', "2").replace("DEFAULT_VCS", str(NOC_SCHEMA.fields["noc"].fields["vcs"].default)))
    # what the point asks for: k, rate and link_latency (vcs is set to its default: left out, as unset keys are)
    assert plan.points[0].id == config_hash({"noc": {"k": 4, "link_latency": 2, "rate": 0.25}})
    # and it does not depend on how the spec spells the point
    again = _plan(tmp_path, """
        [[points]]
        "noc.link_latency" = 2
        noc = { rate = 0.25 }
    """)
    assert again.points[0].id == plan.points[0].id


def test_zip_advances_lists_together_and_crosses_the_grid(tmp_path):
    plan = _plan(tmp_path, """
        [axes]
        noc.rate = [0.1, 0.2]
        [[zip]]
        noc.vcs = [2, 4, 8]
        noc.vc_buffers = [3, 5, 7]
    """)
    pairs = [(p.config["noc"]["rate"], p.config["noc"]["vcs"], p.config["noc"]["vc_buffers"]) for p in plan.points]
    assert pairs == [(r, v, b) for r in (0.1, 0.2) for v, b in ((2, 3), (4, 5), (8, 7))]


def test_random_samples_are_reproducible_in_range_and_a_prefix_of_longer_runs(tmp_path):
    body = """
        [random]
        samples = {n}
        seed = 11
        [random.axes]
        noc.rate = {{uniform = [0.05, 0.4]}}
        noc.vcs = {{choice = [2, 4, 8]}}
        noc.vc_buffers = {{randint = [2, 6]}}
        noc.hotspot_fraction = {{loguniform = [0.01, 0.5]}}
    """
    a = _plan(tmp_path, body.format(n=20))
    b = _plan(tmp_path, body.format(n=20))
    c = _plan(tmp_path, body.format(n=40))
    assert [p.id for p in a.points] == [p.id for p in b.points]
    assert [p.id for p in c.points][:20] == [p.id for p in a.points]
    noc = [p.config["noc"] for p in c.points]
    assert all(0.05 <= n["rate"] < 0.4 and n["vcs"] in (2, 4, 8) and 2 <= n["vc_buffers"] <= 6
               and 0.01 <= n["hotspot_fraction"] < 0.5 for n in noc)
    assert {n["vc_buffers"] for n in noc} == {2, 3, 4, 5, 6}  # randint includes both bounds
    other_seed = _plan(tmp_path, body.format(n=20).replace("seed = 11", "seed = 12"))
    assert [p.id for p in other_seed.points] != [p.id for p in a.points]


def test_explicit_points_follow_the_grid_and_duplicates_are_dropped(tmp_path):
    plan = _plan(tmp_path, """
        [axes]
        noc.rate = [0.1, 0.2]
        [[points]]
        noc.rate = 0.3
        [[points]]
        noc.rate = 0.1
    """)
    assert [p.config["noc"]["rate"] for p in plan.points] == [0.1, 0.2, 0.3]
    assert plan.duplicates == 1
    assert len({p.id for p in plan.points}) == 3


def test_no_axes_means_the_base_is_the_one_point_and_a_base_file_works(tmp_path):
    (tmp_path / "base.toml").write_text("[noc]\nk = 4\nrate = 0.2\n")
    head = '[sweep]\nname = "s"\ncommand = "noc"\n'
    plan = _plan(tmp_path, 'base = "base.toml"\n' + head, head="")
    assert len(plan.points) == 1 and plan.points[0].config["noc"]["rate"] == 0.2


def test_swept_columns_are_typed_from_the_resolved_values(tmp_path):
    plan = _plan(tmp_path, """
        [axes]
        noc.rate = [1, 0.5]
        noc.vcs = [2, 4]
        noc.traffic = ["uniform"]
        noc.warmup_cycles = ["1us", 200]
    """.replace('"1us", 200', "100, 200"))
    types = {f.name: str(f.type) for f in plan.axes.fields}
    assert types == {"noc_rate": "double", "noc_vcs": "int64", "noc_traffic": "string", "noc_warmup_cycles": "int64"}


BAD = """
[sweep]
name = "bad name/"
command = "noc"
partition_by = ["noc.rates"]
max_retry = 2

[base]
noc.k = 4

[axes]
noc.rte = [0.1]
noc.vcs = [0, 2]
noc.topology = []

[[zip]]
noc.rows = [4, 8]
noc.cols = [4]

[random]
samples = 3
[random.axes]
noc.rate = {uniform = [0.5, 0.1]}
"""


def test_a_bad_spec_lists_every_problem_at_once(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(BAD)
    with pytest.raises(ConfigError) as err:
        plan_sweep(spec)
    text = str(err.value)
    for needle in [
        "sweep.max_retry: unknown key; did you mean 'sweep.max_retries'?",
        "sweep.name: 'bad name/' must start with a letter or digit, then letters",
        "axes.noc.topology: is an empty list",
        "zip[0]: lists must have the same length: noc.rows has 2, noc.cols has 1",
        "random.axes.noc.rate: low 0.5 must be below high 0.1",
    ]:
        assert needle in text, needle


def test_unknown_config_paths_get_a_did_you_mean(tmp_path):
    with pytest.raises(ConfigError) as err:
        _plan(tmp_path, """
            [axes]
            noc.rte = [0.1]
            run.sed = [1]
        """)
    assert "noc.rte: not a config key; did you mean 'noc.rate'?" in str(err.value)
    assert "run.sed: not a config key; did you mean 'run.seed'?" in str(err.value)


def test_invalid_point_values_are_reported_with_the_points_they_affect(tmp_path):
    with pytest.raises(ConfigError) as err:
        _plan(tmp_path, """
            [axes]
            noc.vcs = [0, 4, 0]
            noc.topology = ["mesh", "tourus"]
        """)
    text = str(err.value)
    assert "noc.vcs: 0 is below the minimum 1 (points 0, 1, 4, 5)" in text
    assert "did you mean 'torus'" in text and "(points 1, 3, 5)" in text


def test_partition_keys_must_be_config_keys_with_single_values(tmp_path):
    head = HEAD.replace('command = "noc"', 'command = "noc"\npartition_by = ["noc.rates", "noc.nope"]')
    with pytest.raises(ConfigError) as err:
        _plan(tmp_path, "\n[axes]\nnoc.rates = [[0.1, 0.2]]\n", head=head)
    text = str(err.value)
    assert "noc.rates: a partition key needs a single value" in text
    assert "sweep.partition_by[1]: 'noc.nope': not a config key" in text


@pytest.mark.parametrize("body,needle", [
    ('[sweep]\nname = "s"\ncommand = "nco"\n',
     "sweep.command: 'nco' is not one of noc, run, system, noop (echo the config back, for tests and overhead "
     "benchmarks) (did you mean 'noc'?)"),
    ('[sweep]\nname = "s"\ncommand = "alloc"\n', "sweep.command: 'alloc' is not one of noc, run, system, noop ("),
    ('[sweep]\ncommand = "noc"\n', "sweep.name: is required"),
    ('[sweep]\nname = "s"\ncommand = "noc"\n[axes]\nnoc.k = 4\n', "axes.noc.k: expected a list of values"),
    ('base = "missing.toml"\n[sweep]\nname = "s"\ncommand = "noc"\n', "base: config file"),
    ('[sweep]\nname = "s"\ncommand = "noc"\n[axis]\n', "axis: unknown key; did you mean 'axes'?"),
    ('[sweep]\nname = "s"\ncommand = "noc"\n[random.axes]\nnoc.rate = {uniform = [0.1, 0.2]}\n',
     "random.samples: is required"),
    ('[sweep]\nname = "s"\ncommand = "noc"\n[axes]\nrun.backend = ["lokal"]\n', "did you mean 'local'"),
    ('[sweep]\nname = "s"\ncommand = "noc"\n[axes]\nsweep_id = ["x"]\n', "not a config key"),
    ('[sweep\nname = "s"', "not valid TOML"),
])
def test_cli_rejects_bad_specs_with_exit_2_and_no_traceback(tmp_path, capsys, body, needle):
    spec = tmp_path / "spec.toml"
    spec.write_text(body)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_cli_status_of_a_directory_without_sweeps(tmp_path, capsys):
    assert main(["sweep", "status", str(tmp_path)]) == 2
    assert "no sweep at" in capsys.readouterr().err


def test_an_unknown_command_by_name_names_the_commands_a_user_can_sweep():
    from cluster.errors import UserError
    from cluster.sweep.commands import get

    with pytest.raises(UserError, match=r"^unknown sweep command 'alloc'; known: noc, run, system$"):
        get("alloc")


@pytest.mark.parametrize("name,points", [("sweep_noc.toml", 60), ("sweep_noc_design.toml", 26)])
def test_example_specs_expand_to_their_documented_points(name, points):
    plan = plan_sweep(EXAMPLES / name)
    assert len(plan.points) == points and plan.duplicates == 0


def test_example_run_spec_expands_to_every_policy_and_protocol():
    points = plan_sweep(EXAMPLES / "sweep_run.toml").points
    assert len(points) == 18
    assert {(p.config["memory"]["policy"], p.config["memory"]["reclaim"]) for p in points} == {
        (m, r) for m in ("static-multi", "virtual") for r in ("refcount", "refcount-gated", "partial-free")}
    assert {p.config["workload"]["kind"] for p in points} == {"moe"}  # where reclamation matters


def test_file_paths_are_taken_from_where_they_are_written_whatever_the_working_directory(tmp_path, monkeypatch):
    import shutil

    # a base config beside its traces (as examples/kv_decode_trace.toml is), a spec elsewhere
    # naming it and sweeping a second trace written relative to the spec, run from a third place
    conf, specs, away = tmp_path / "conf", tmp_path / "specs", tmp_path / "away"
    for d in (conf / "traces", specs / "mine", away):
        d.mkdir(parents=True)
    shutil.copy(EXAMPLES / "kv_decode_trace.toml", conf)
    shutil.copy(EXAMPLES / "traces" / "azure_code_sample.csv", conf / "traces")
    shutil.copy(EXAMPLES / "traces" / "azure_code_sample.csv", specs / "mine" / "other.csv")
    spec = specs / "s.toml"
    spec.write_text(textwrap.dedent("""
        base = "../conf/kv_decode_trace.toml"
        [sweep]
        name = "t"
        command = "run"
        [axes]
        workload.decode.trace = ["", "mine/other.csv"]
    """))
    monkeypatch.chdir(away)
    plan = plan_sweep(spec)
    traces = [p.config["workload"]["decode"]["trace"] for p in plan.points]
    assert traces[0] == "" and traces[1] == str(specs / "mine" / "other.csv")
    base = plan.spec.base["workload"]["decode"]["trace"]
    assert base == str(conf / "traces" / "azure_code_sample.csv")  # the base file's own, from its directory
    spec.write_text(spec.read_text().replace('["", "mine/other.csv"]', '["mine/other.csv"]'))
    point = plan_sweep(spec).points[0]
    assert (away / point.config["workload"]["decode"]["trace"]).exists()

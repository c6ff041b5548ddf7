"""A sweep point's identity: what its config asks for (keys away from their defaults, files by content), so a
new config key, another clone or another directory keep it, a changed trace does not, and a sweep stored
under the earlier ids (the hash of the whole resolved config) resumes with nothing recomputed."""

import hashlib
import os
import shutil
import textwrap
from dataclasses import replace

import pytest

from cluster.config import Field, Table, config_hash
from cluster.config.identity import FileDigests
from cluster.config.noc import NOC_SCHEMA
from cluster.sweep.dataset import read_dataset
from cluster.sweep.known import stored_plan
from cluster.sweep.plan import plan_sweep
from cluster.sweep.points import expand
from cluster.sweep.runner import run_sweep
from cluster.sweep.spec import EXECUTION_KEYS, read_spec
from tests.paths import EXAMPLES

NOC_SPEC = """
[sweep]
name = "ids"
command = "noc"
[base]
noc.k = 4
[axes]
noc.rate = [0.1, 0.2]
noc.traffic = ["uniform", "transpose"]
"""


def _with_noc_keys(**fields: Field) -> Table:
    """A copy of the noc command's schema with more [noc] keys (the global schema is left as it is)."""
    noc = NOC_SCHEMA.fields["noc"]
    grown = Table({**noc.fields, **fields}, noc.doc, noc.checks, given_checks=noc.given_checks, fill=noc.fill)
    return Table({**NOC_SCHEMA.fields, "noc": grown}, NOC_SCHEMA.doc, NOC_SCHEMA.checks,
                 given_checks=NOC_SCHEMA.given_checks, fill=NOC_SCHEMA.fill)


def _ids(text: str, schema: Table) -> list[str]:
    spec, issues = read_spec(textwrap.dedent(text))
    points, found, _, _ = expand(spec, schema)
    assert not issues and not found
    return [p.id for p in points]


def test_a_key_added_with_a_default_keeps_every_point_id_and_setting_it_makes_new_ones():
    grown = _with_noc_keys(burst=Field("int", 3, "a new knob"), scratch=Field("size", "1KiB", "a new buffer"))
    before = _ids(NOC_SPEC, NOC_SCHEMA)
    assert len(set(before)) == 4
    assert _ids(NOC_SPEC, grown) == before  # the defaults (1 KiB normalised to 1024 bytes) are left out
    assert _ids(NOC_SPEC + 'noc.scratch = ["1KiB"]\n', grown) == before  # set to its default: the same point
    assert _ids(NOC_SPEC + "noc.burst = [3]\n", grown) == before
    changed = _ids(NOC_SPEC + "noc.burst = [5]\n", grown)
    assert len(set(changed)) == 4 and not set(changed) & set(before)


def _clone(root, name: str, more: str = ""):
    """A checkout at ``root/name``: the kv-decode trace example, its two traces, and a spec sweeping them
    (and ``more`` axes)."""
    where = root / name
    (where / "traces").mkdir(parents=True)
    shutil.copy(EXAMPLES / "kv_decode_trace.toml", where)
    for trace in ("azure_code_sample.csv", "azure_code_pressure.csv"):
        shutil.copy(EXAMPLES / "traces" / trace, where / "traces")
    spec = where / "sweep.toml"
    spec.write_text(textwrap.dedent("""
        base = "kv_decode_trace.toml"
        [sweep]
        name = "traces"
        command = "run"
        [axes]
        workload.decode.trace = ["traces/azure_code_sample.csv", "traces/azure_code_pressure.csv"]
        memory.on_oom = ["stall", "fail"]
    """) + textwrap.dedent(more))
    return spec


def test_the_same_spec_in_two_directories_gives_the_same_ids_and_spec_version(tmp_path, monkeypatch):
    a, b = _clone(tmp_path, "a"), _clone(tmp_path, "b")
    monkeypatch.chdir(tmp_path)
    plan_a, plan_b = plan_sweep(a), plan_sweep(b.relative_to(tmp_path))  # one named absolutely, one relatively
    traces = [(p.config["workload"]["decode"]["trace"], q.config["workload"]["decode"]["trace"])
              for p, q in zip(plan_a.points, plan_b.points)]
    assert all(ta.startswith(str(tmp_path / "a")) and tb.startswith("b/") for ta, tb in traces)  # different paths
    assert [p.id for p in plan_a.points] == [p.id for p in plan_b.points] and len(plan_a.points) == 4
    assert plan_a.spec_hash == plan_b.spec_hash


def test_a_trace_changed_by_one_byte_makes_new_points_and_a_new_spec_version(tmp_path):
    spec = _clone(tmp_path, "a")
    before = plan_sweep(spec)
    trace = tmp_path / "a" / "traces" / "azure_code_pressure.csv"
    data = bytearray(trace.read_bytes())
    last = data.rindex(b"1")  # one digit of the last record's token counts
    data[last:last + 1] = b"2"
    trace.write_bytes(bytes(data))
    after = plan_sweep(spec)
    changed = [b.id != a.id for a, b in zip(before.points, after.points)]
    uses = ["pressure" in p.config["workload"]["decode"]["trace"] for p in before.points]
    assert changed == uses == [False, False, True, True]
    assert after.spec_hash != before.spec_hash


def test_file_digests_read_a_file_once_and_again_when_it_changes(tmp_path):
    f = tmp_path / "t.csv"
    f.write_bytes(b"a,b\n1,2\n")
    digests = FileDigests()
    first = digests.identity(str(f))
    assert first == "sha256:" + hashlib.sha256(b"a,b\n1,2\n").hexdigest()
    assert digests.identity(str(f)) == first and len(digests.known) == 1
    f.write_bytes(b"a,b\n1,3\n")  # the same size
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert digests.identity(str(f)) == "sha256:" + hashlib.sha256(b"a,b\n1,3\n").hexdigest()
    assert len(digests.known) == 2
    assert digests.identity(str(tmp_path)) == str(tmp_path)  # a directory: by its path
    assert digests.identity(str(tmp_path / "missing.csv")) == str(tmp_path / "missing.csv")


NOOP_SPEC = """
[sweep]
name = "old"
command = "noop"
[axes]
noop.value = [1, 2, 3, 4, 5]
"""


def _as_main_planned(plan, schema_then: dict | None = None):
    """``plan`` as rdasim planned it before points were identified by what they ask for: each point's id the
    hash of its whole resolved config (with ``schema_then``'s keys: a schema with one more key than now), the
    spec version's the hash of the spec as written and its base."""
    raw = {k: v for k, v in plan.spec.raw.items() if k != "base"}
    raw["sweep"] = {k: v for k, v in raw["sweep"].items() if k not in EXECUTION_KEYS}
    return replace(plan, points=[replace(p, id=config_hash({**p.config, **(schema_then or {})})) for p in plan.points],
                   spec_hash=config_hash({"spec": raw, "base": plan.spec.base}))


@pytest.mark.parametrize("manifest", ["kept", "lost"])
def test_a_sweep_stored_under_the_earlier_ids_resumes_with_nothing_recomputed(tmp_path, manifest):
    spec = tmp_path / "old.toml"
    spec.write_text(NOOP_SPEC)
    plan = plan_sweep(spec)
    old = _as_main_planned(plan)
    assert not {p.id for p in plan.points} & {p.id for p in old.points} and plan.spec_hash != old.spec_hash
    out = tmp_path / "out"
    first = run_sweep(replace(old, points=old.points[:3]), out, quiet=True, in_process=True)
    assert first.computed == 3
    if manifest == "lost":
        (out / "_old.manifest.json").unlink()
    again = run_sweep(plan, out, quiet=True, in_process=True)
    assert (again.skipped, again.computed, again.total) == (3, 2, 5)  # only the two never stored run
    rows = read_dataset(out / "old").to_pylist()
    as_stored = stored_plan(plan, out)
    assert sorted(r["point_id"] for r in rows) == sorted(p.id for p in as_stored.points)  # each point once
    assert [p.id for p in as_stored.points] == [p.id for p in old.points[:3]] + [p.id for p in plan.points[3:]]
    assert {r["sweep_spec"] for r in rows} == {old.spec_hash}  # one spec version, known by its stored hash
    status = run_sweep(plan, out, quiet=True, in_process=True)
    assert (status.skipped, status.computed) == (5, 0)


def test_a_time_default_in_cycles_is_left_out_at_any_clock_and_a_list_of_tables_at_its_default():
    from cluster.config.identity import ConfigIdentity
    from cluster.config.schema import TableList, validate

    chip = {"clock": Field("frequency", "1GHz", "the clock")}
    grown = {**chip, "delay": Field("cycles", "10ns", "a new delay", clock="chip.clock")}
    lanes = TableList(Table({"width": Field("int", 8, "bits")}), "lanes", default=[{"width": 8}])
    before, after = Table({"chip": Table(chip)}), Table({"chip": Table(grown), "lanes": lanes})
    for clock, cycles in (("1GHz", 10), ("2GHz", 20)):  # 10 ns is 10 cycles at 1 GHz, 20 at 2 GHz
        cfg, issues = validate({"chip": {"clock": clock}}, after)
        assert not issues and cfg["chip"]["delay"] == cycles and cfg["lanes"] == [{"width": 8}]
        old, _ = validate({"chip": {"clock": clock}}, before)
        assert ConfigIdentity(after).point_id(cfg) == ConfigIdentity(before).point_id(old)
    slow, _ = validate({"chip": {"clock": "2GHz", "delay": 10}, "lanes": [{"width": 16}]}, after)
    assert ConfigIdentity(after).asked_for(slow) == {"chip": {"clock": 2e9, "delay": 10}, "lanes": [{"width": 16}]}


def test_a_list_of_files_is_identified_by_their_contents(tmp_path):
    from cluster.config.identity import ConfigIdentity
    from cluster.config.schema import validate

    schema = Table({"w": Table({"routes": Field("list", [], "routing files", item=Field("str", file=True))})})
    (tmp_path / "a.npz").write_bytes(b"A")
    (tmp_path / "b.npz").write_bytes(b"B")
    cfg, _ = validate({"w": {"routes": [str(tmp_path / "a.npz"), str(tmp_path / "b.npz")]}}, schema)
    assert ConfigIdentity(schema).asked_for(cfg) == {"w": {"routes": ["sha256:" + hashlib.sha256(b).hexdigest()
                                                                      for b in (b"A", b"B")]}}


def test_one_trace_under_two_names_is_one_point(tmp_path):
    spec = _clone(tmp_path, "a")
    shutil.copy(tmp_path / "a" / "traces" / "azure_code_sample.csv", tmp_path / "a" / "traces" / "copy.csv")
    spec.write_text(spec.read_text().replace('"traces/azure_code_pressure.csv"', '"traces/copy.csv"'))
    plan = plan_sweep(spec)
    assert (len(plan.points), plan.duplicates) == (2, 2)  # the copy asks for what the original does


TINY = """
    workload.decode.requests = [2]
    workload.decode.max_output_tokens = [4]
"""


def test_a_sweep_stored_from_another_clone_at_another_schema_resumes_from_its_manifest(tmp_path):
    """Neither rule gives the stored ids (a key the schema had then; clone a's paths): the manifest's record of
    each point (its spec version's base and its values) does, read where they were, each file by content."""
    a, b = _clone(tmp_path, "a", TINY), _clone(tmp_path, "b", TINY)
    old = _as_main_planned(plan_sweep(a), schema_then={"legacy_knob": {"on": True}})
    out = tmp_path / "out"
    first = run_sweep(replace(old, points=old.points[:3]), out, quiet=True, in_process=True)
    assert (first.computed, first.failed) == (3, 0)
    plan = plan_sweep(b)
    assert not {p.id for p in plan.points} & {p.id for p in old.points} and plan.spec_hash != old.spec_hash
    again = run_sweep(plan, out, quiet=True, in_process=True)
    assert (again.skipped, again.computed, again.total) == (3, 1, 4)  # only the point never stored runs
    rows = read_dataset(out / "traces").to_pylist()
    as_stored = stored_plan(plan, out)
    assert [p.id for p in as_stored.points] == [p.id for p in old.points[:3]] + [plan.points[3].id]
    assert sorted(r["point_id"] for r in rows) == sorted(p.id for p in as_stored.points)
    trace = tmp_path / "a" / "traces" / "azure_code_pressure.csv"  # clone a's trace changes: the version that
    trace.write_bytes(trace.read_bytes().replace(b"1", b"2", 1))  # stored them asks for another: none is known
    assert [p.id for p in stored_plan(plan, out).points] == [p.id for p in plan.points]

"""An exploration's identity: its spec hash and its base run are what the spec asks for (keys away from their
defaults, files by content), so a new config key or another clone continues the same study, and a study stored
under the earlier hashes (files by path, the whole resolved config) continues with nothing recomputed."""

import textwrap
from dataclasses import replace

import pyarrow.parquet as pq

from cluster.config import Field, Table, config_hash
from cluster.explore import spec as explore_spec
from cluster.explore.driver import PARETO_FILE, Options, run_explore
from cluster.explore.reference import BASE_FILE, POINT_ID, base_point
from cluster.explore.spec import legacy_hash, read_explore
from cluster.sweep import commands
from cluster.sweep.dataset import read_dataset
from cluster.sweep.manifest import Manifest
from tests.cluster.explore.test_explore import TINY as DRAWN

NOOP = """
[base.noop]
value = 0.5
[explore]
command = "noop"
budget = {budget}
optimizer = "random"
[explore.space]
"noop.sleep" = {{ type = "categorical", values = [0.0] }}
[[explore.objectives]]
metric = "value"
"""


def _grow_noop(monkeypatch, **fields: Field) -> None:
    """The noop command with more [noop] keys, for this test only (the registry is restored after it)."""
    schema = commands.COMMANDS["noop"].schema()
    noop = schema.fields["noop"]
    grown_noop = Table({**noop.fields, **fields}, noop.doc, noop.checks, given_checks=noop.given_checks,
                       fill=noop.fill)
    grown = Table({**schema.fields, "noop": grown_noop}, schema.doc, schema.checks,
                  given_checks=schema.given_checks, fill=schema.fill)
    monkeypatch.setitem(commands.COMMANDS, "noop", replace(commands.COMMANDS["noop"], schema=lambda: grown))


def _noop(tmp_path, budget: int, base: str = ""):
    path = tmp_path / "noop.toml"
    path.write_text(textwrap.dedent(NOOP.format(budget=budget)).replace("value = 0.5\n", "value = 0.5\n" + base))
    return path


def _quiet(**kw) -> Options:
    return Options(in_process=True, quiet=True, **kw)


def _mtimes(out) -> dict[str, int]:
    """Every run's parquet file the study stored (not the front, written anew each time) and when it was written."""
    return {str(p.relative_to(out)): p.stat().st_mtime_ns for p in out.rglob("*.parquet") if p.name != PARETO_FILE}


def test_a_key_added_with_a_default_keeps_the_spec_hash_and_the_base_run(tmp_path, monkeypatch):
    before = read_explore(_noop(tmp_path, 2))
    base_before = base_point(before)
    out = tmp_path / "out"
    first = run_explore(before, out, _quiet())
    assert first.computed == 1  # the second ask repeats the first config: the stored result is reused
    stored = _mtimes(out)

    _grow_noop(monkeypatch, burst=Field("int", 3, "a new knob"))
    after = read_explore(_noop(tmp_path, 3))
    assert after.spec_hash == before.spec_hash and base_point(after).id == base_point(before).id
    assert base_point(after).config != base_before.config  # the resolved config does have the new key
    again = run_explore(after, out, _quiet(budget=3))
    assert (again.stored, again.computed) == (2, 0)  # trial 2 asks for trial 0's config: found, not rerun
    assert {k: v for k, v in _mtimes(out).items() if k in stored} == stored  # base run and trials kept
    rows = sorted(read_dataset(out / "trials").to_pylist(), key=lambda r: r["trial"])
    assert [r["point_node"] for r in rows] == ["in-process", "cache", "cache"]

    changed = read_explore(_noop(tmp_path, 3, "burst = 5\n"))  # set away from its default: another question
    assert changed.spec_hash != before.spec_hash and base_point(changed).id != base_point(before).id


def test_the_base_run_keeps_the_record_of_what_ran_beside_its_id(tmp_path):
    spec = read_explore(_noop(tmp_path, 1))
    out = tmp_path / "out"
    run_explore(spec, out, _quiet())
    row = pq.read_table(out / BASE_FILE).to_pylist()[0]
    point = base_point(spec)
    assert row["config_hash"] == config_hash(point.config)  # the whole resolved config that ran
    assert "base-" + row[POINT_ID] == point.id and row[POINT_ID] != row["config_hash"]


TRACE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-14 22:13:20.0000000,24,4
2023-11-14 22:13:20.0001000,40,6
2023-11-14 22:13:20.0002000,16,5
"""

TINY = DRAWN.replace("[workload.decode]\n", '[workload.decode]\ntrace = "trace.csv"\n')  # its arrivals, lengths

KV = """
base = "tiny.toml"
[explore]
budget = 1
space."memory.block_bytes" = { type = "ordinal", values = ["512B", "2KiB"] }
objectives = [{ metric = "tokens_per_second", direction = "maximize" }]
"""


def _clone(root, name: str):
    """A checkout at ``root/name`` holding the spec, its base and the trace it names (a copy in each)."""
    where = root / name
    where.mkdir()
    (where / "trace.csv").write_text(TRACE)
    (where / "tiny.toml").write_text(TINY)
    (where / "kv.toml").write_text(KV)
    return where / "kv.toml"


def test_the_same_spec_from_two_clones_continues_the_same_study(tmp_path):
    a, b = read_explore(_clone(tmp_path, "a")), read_explore(_clone(tmp_path, "b"))
    assert a.base["workload"]["decode"]["trace"] != b.base["workload"]["decode"]["trace"]  # other paths
    assert a.spec_hash == b.spec_hash and base_point(a).id == base_point(b).id
    assert a.sweep.legacy_spec_hash != b.sweep.legacy_spec_hash  # the earlier rule told them apart
    out = tmp_path / "out"
    assert run_explore(a, out, _quiet()).computed == 1
    stored = _mtimes(out)
    assert pq.read_table(out / BASE_FILE)["status"].to_pylist() == ["completed"]
    assert BASE_FILE in stored and any(k.endswith("t000000r0.run_summary.parquet") for k in stored)
    again = run_explore(b, out, _quiet())
    assert (again.stored, again.computed) == (1, 0) and _mtimes(out) == stored
    (tmp_path / "b" / "trace.csv").write_text(TRACE.replace(",40,6", ",40,7"))  # one byte: another question
    changed = read_explore(tmp_path / "b" / "kv.toml")
    assert changed.spec_hash != a.spec_hash and base_point(changed).id != base_point(a).id


def _hashed_as_before(monkeypatch) -> None:
    """Specs read while this patch holds are hashed by the earlier rule (what they ask for, base files by path)."""
    monkeypatch.setattr(explore_spec, "explore_hash", lambda explore, base, identity: legacy_hash(explore, base))


def _strip_point_id(out) -> None:
    """The base run's row as the earlier code wrote it: no point_id, its config_hash (the whole resolved
    config's, as the run records it) its id."""
    table = pq.read_table(out / BASE_FILE)
    pq.write_table(table.drop_columns([POINT_ID]), out / BASE_FILE)


def test_a_study_stored_under_the_earlier_hashes_continues_with_nothing_recomputed(tmp_path, monkeypatch):
    path, out = _clone(tmp_path, "a"), tmp_path / "out"
    now = read_explore(path)
    with monkeypatch.context() as m:
        _hashed_as_before(m)
        old = read_explore(path)
    assert old.spec_hash == now.sweep.legacy_spec_hash != now.spec_hash  # the trace named by its path
    run_explore(old, out, _quiet())
    _strip_point_id(out)
    stored = _mtimes(out)
    again = run_explore(now, out, _quiet())
    assert (again.stored, again.computed) == (1, 0) and _mtimes(out) == stored  # the old base run reused too
    manifest = Manifest.load(out / "_trials.manifest.json")
    assert manifest.spec_hashes() == [old.spec_hash]  # one spec version, known by its stored hash
    assert {r["sweep_spec"] for r in read_dataset(out / "trials").to_pylist()} == {old.spec_hash}


def test_a_study_stored_under_the_earlier_hash_in_another_clone_is_known_by_its_manifest(tmp_path, monkeypatch):
    spec_a, out = _clone(tmp_path, "a"), tmp_path / "out"
    with monkeypatch.context() as m:
        _hashed_as_before(m)
        old = read_explore(spec_a)
    run_explore(old, out, _quiet())
    _strip_point_id(out)
    stored = _mtimes(out)
    b = read_explore(_clone(tmp_path, "b"))
    assert old.spec_hash not in (b.spec_hash, b.sweep.legacy_spec_hash)  # by neither rule: by the record
    again = run_explore(b, out, _quiet())
    assert (again.stored, again.computed) == (1, 0) and _mtimes(out) == stored  # its base run reused too
    assert Manifest.load(out / "_trials.manifest.json").spec_hashes() == [old.spec_hash]

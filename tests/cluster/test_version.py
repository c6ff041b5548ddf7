"""Which code produced a result: the commit of a checkout, dirty exactly when its code differs, a digest per edit."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from cluster.version import CODE_PATHS, CodeVersion
from tests.paths import ROOT

COMMIT = "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"


@pytest.mark.parametrize("v,label", [
    (CodeVersion("0.1.0", None, None), "0.1.0"),
    (CodeVersion("0.1.0", COMMIT, False), "0.1.0+g1a2b3c4d5e6f"),
    (CodeVersion("0.1.0", COMMIT, True, "abcdef012345"), "0.1.0+g1a2b3c4d5e6f.dirty.abcdef012345"),
])
def test_labels(v, label):
    assert v.label == label
    assert v.to_json() == {"version": v.version, "commit": v.commit, "dirty": v.dirty, "digest": v.digest}


def _git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A small git checkout holding this version.py, and a function asking it for its code version afresh."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (tmp_path / "cluster").mkdir()
    shutil.copy(ROOT / "cluster" / "version.py", tmp_path / "cluster" / "version.py")
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "model.py").write_text("LATENCY = 1\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "probe"\n')
    (tmp_path / "README.md").write_text("notes\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "start")
    spec = importlib.util.spec_from_file_location("version_probe", tmp_path / "cluster" / "version.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)

    def version() -> CodeVersion:
        module.code_version.cache_clear()
        return module.code_version()

    return tmp_path, version


def test_a_clean_checkout_names_its_commit(checkout):
    repo, version = checkout
    v = version()
    assert (v.commit, v.dirty, v.digest) == (_git(repo, "rev-parse", "HEAD"), False, None)
    assert len(v.commit) == 40


def test_an_edit_is_dirty_and_each_edit_has_its_own_digest(checkout):
    repo, version = checkout
    model = repo / "sim" / "model.py"
    model.write_text("LATENCY = 2\n")
    first = version()
    assert first.dirty is True and len(first.digest) == 12
    model.write_text("LATENCY = 3\n")
    assert version().digest != first.digest
    model.write_text("LATENCY = 2\n")
    assert version() == first  # the same edit, the same digest
    model.write_text("LATENCY = 1\n")
    assert version().dirty is False


def test_a_new_code_file_is_dirty_and_its_content_counts(checkout):
    repo, version = checkout
    new = repo / "cluster" / "new.py"
    new.write_text("A = 1\n")
    first = version()
    assert first.dirty is True
    new.write_text("A = 2\n")
    assert version().digest != first.digest


def test_files_outside_the_code_do_not_make_it_dirty(checkout):
    repo, version = checkout
    assert "README.md" not in CODE_PATHS
    (repo / "README.md").write_text("other notes\n")
    (repo / "results.csv").write_text("1,2\n")
    assert version().dirty is False


def test_outside_a_checkout_commit_and_dirty_are_unknown(checkout):
    repo, version = checkout
    shutil.rmtree(repo / ".git")
    v = version()
    assert (v.commit, v.dirty, v.digest) == (None, None, None) and v.label == v.version

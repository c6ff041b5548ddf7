"""The packages' modules import one another without a cycle, and in the direction docs/design.md
states ("Imports point one way": rdasim -> cluster -> sim -> mapping, allocators; only cluster
imports Ray).

A cycle counts the imports that run when a module is loaded: at module level, in a class body or
under a module-level ``if``/``try``; not inside a function, nor under ``if TYPE_CHECKING:``.
Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first, so an import is an
edge to the module it names and to every package on the way, except the packages that hold the
importing module itself (they are already loading when it runs: a package's ``__init__.py``
re-exporting its modules is no cycle, unless a module takes a name from the package itself).
The direction of imports counts every import, wherever it is: a deferred one still depends.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from tests.paths import ROOT

PACKAGES = ("sim", "mapping", "allocators", "cluster", "rdasim")


def _modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted name -> file of every module of the packages (a package by its __init__.py)."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _load_time_imports(body: list[ast.stmt]):
    """The import statements among ``body`` that run when the module loads."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _load_time_imports(node.orelse)
        else:  # if / try / with / for / class bodies run at load time
            for field in ("body", "orelse", "finalbody", "handlers"):
                yield from _load_time_imports(getattr(node, field, []))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules) -> list[str]:
    """Dotted names an import statement loads: ``from a import b`` loads ``a.b`` when that is a
    module, else ``a`` (whose attribute ``b`` must then exist: ``a`` must have finished loading)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:  # relative: from the module's package, one level up per extra dot
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def import_graph(root: Path, packages=PACKAGES) -> nx.DiGraph:
    """Module -> every module of the packages its loading runs."""
    modules = _modules(root, packages)
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, path in modules.items():
        own = name.split(".")
        for node in _load_time_imports(ast.parse(path.read_text(), filename=str(path)).body):
            for target in _targets(node, name, path.name == "__init__.py", modules):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    dep = ".".join(parts[:i])
                    holds_me = i < len(parts) and parts[:i] == own[:i]  # on the way, and mine
                    if dep in modules and dep != name and not holds_me:
                        g.add_edge(name, dep)
    return g


def cycles(g: nx.DiGraph) -> list[str]:
    """One cycle of each group of modules that import one another, as ``a -> b -> a``."""
    out = []
    for group in nx.strongly_connected_components(g):
        if len(group) > 1:
            loop = [a for a, _ in nx.find_cycle(g.subgraph(group))]
            first = loop.index(min(loop))  # start at the first name, so the message is stable
            loop = loop[first:] + loop[:first]
            out.append(" -> ".join(loop + [loop[0]]))
    return sorted(out)


def _imported_packages(root: Path) -> dict[str, set[str]]:
    """Module -> the top-level packages (``ray``, ``sim``, ...) it imports anywhere in its file."""
    out = {}
    for name, path in _modules(root).items():
        tops = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                tops.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                tops.add(name.split(".")[0] if node.level else (node.module or "").split(".")[0])
        out[name] = tops
    return out


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_a_cycle_is_found_and_deferred_imports_are_not_one(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.a import A\n",  # re-exports: no cycle
        "pkg/a.py": "from pkg.b import B\nA = 1\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.c import C\nB = 2\n",
        "pkg/c.py": "from pkg import d\nC = 3\ndef f():\n    from pkg.a import A\n",
        "pkg/d.py": "from . import e\n",
        "pkg/e.py": "try:\n    from .sub.f import F\nexcept ImportError:\n    pass\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/f.py": "import pkg.d\nF = 4\n",
    })
    g = import_graph(tmp_path, ("pkg",))
    assert set(g.edges) == {("pkg", "pkg.a"), ("pkg.a", "pkg.b"), ("pkg.c", "pkg.d"), ("pkg.d", "pkg.e"),
                            ("pkg.e", "pkg.sub"), ("pkg.e", "pkg.sub.f"), ("pkg.sub.f", "pkg.d")}
    assert cycles(g) == ["pkg.d -> pkg.e -> pkg.sub.f -> pkg.d"]


def test_no_import_cycle():
    g = import_graph(ROOT)
    assert g.has_edge("sim.noc.shard", "sim.noc.kernel") and len(g) > 100  # it sees the packages
    found = cycles(g)
    assert not found, "import cycles:\n" + "\n".join(found)


@pytest.mark.parametrize("package", ["mapping", "allocators"])
def test_planners_import_neither_the_simulator_nor_the_cluster(package):
    wrong = {m: sorted(tops & {"sim", "cluster"}) for m, tops in _imported_packages(ROOT).items()
             if m.split(".")[0] == package and tops & {"sim", "cluster"}}
    assert not wrong, f"{package} must not import sim or cluster: {wrong}"


def test_only_the_cluster_imports_ray():
    imports = _imported_packages(ROOT)
    assert any("ray" in tops for m, tops in imports.items() if m.startswith("cluster."))  # it sees Ray
    wrong = sorted(m for m, tops in imports.items() if "ray" in tops and not m.startswith("cluster"))
    assert not wrong, f"only cluster/ may import ray: {wrong}"


def test_the_chip_never_imports_the_workloads():
    # workloads are programs on the chip's units: sim/workloads imports the chip, never the other
    # way (what the chip asks of a workload is declared with it, sim/chip/program.py)
    imports = _imported_modules(ROOT)
    assert any(m.startswith("sim.chip") for m in imports["sim.workloads.kv_decode"])  # it sees the imports
    wrong = {m: sorted(t for t in targets if t.split(".")[:2] == ["sim", "workloads"])
             for m, targets in imports.items() if m.split(".")[:2] == ["sim", "chip"]}
    wrong = {m: t for m, t in wrong.items() if t}
    assert not wrong, f"sim.chip must not import sim.workloads: {wrong}"


def _imported_modules(root: Path) -> dict[str, set[str]]:
    """Module -> the dotted names it imports anywhere in its file (a deferred or TYPE_CHECKING import too)."""
    modules = _modules(root)
    out = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(_targets(node, name, path.name == "__init__.py", modules))
        out[name] = found
    return out


def test_the_api_is_a_thin_layer_over_the_cluster_and_nothing_imports_it():
    """rdasim/ (the Python API) imports the real work from cluster/ and has none of its own: no
    class, and no package of the repository but cluster; no other package imports it."""
    imports = _imported_packages(ROOT)
    ours = {"sim", "mapping", "allocators", "cluster", "rdasim"}
    api = {m: tops & ours for m, tops in imports.items() if m.split(".")[0] == "rdasim"}
    assert api and all(tops <= {"cluster", "rdasim"} for tops in api.values()), api
    wrong = sorted(m for m, tops in imports.items() if "rdasim" in tops and m.split(".")[0] != "rdasim")
    assert not wrong, f"only rdasim/ may import rdasim: {wrong}"
    for path in (ROOT / "rdasim").rglob("*.py"):
        classes = [n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]
        assert not classes, f"{path.name} defines {classes}: a record or logic belongs in cluster/"

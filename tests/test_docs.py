"""The documents agree with the code: the generated reference is current, every link lands on a
file and heading that exist, every repository path they name exists."""

import re

from tests.paths import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
# a repository path: a top-level folder of the repository, then a path inside it
REPO_PATH = re.compile(r"\b((?:sim|mapping|allocators|cluster|rdasim|tests|benchmarks|examples|deploy)/[\w./-]*\w)")
PACKAGES = ("sim", "mapping", "allocators", "cluster", "rdasim")


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {github_anchor(m) for m in re.findall(r"^#+ (.*)$", text, re.M)}


def test_github_anchor_matches_githubs_rule():
    assert github_anchor("`rdasim run` `[workload.dataflow]`") == "rdasim-run-workloaddataflow"
    assert github_anchor("Mapped execution: a DFModel plan (`workload.kind = \"dataflow\"`)") == \
        "mapped-execution-a-dfmodel-plan-workloadkind--dataflow"
    assert github_anchor("`run_summary`") == "run_summary"


def test_generated_reference_matches_the_code():
    from cluster.config.docs import REFERENCE, REGENERATE, reference

    assert REFERENCE == ROOT / "docs" / "reference.md"
    assert REFERENCE.read_text() == reference(), f"docs/reference.md is out of date: run `{REGENERATE}`"


def test_every_table_and_command_is_in_the_reference():
    from cluster.config.docs import command_schemas
    from cluster.config.schema import walk
    from cluster.results.schemas import ALL_TABLES

    text = (ROOT / "docs" / "reference.md").read_text()
    found = anchors(text)
    assert {t.name for t in ALL_TABLES} <= found
    assert {"rdasim-noc", "rdasim-run", "rdasim-map", "every-table"} <= found
    for _, schema in command_schemas():
        for path, _ in walk(schema):
            assert f"| `{path}" in text, path
    assert "`rdasim_commit`" in text and "`status_detail`" in text and "`cut_off`" in text


def test_every_relative_link_lands_on_a_file_and_a_heading():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                broken.append(f"{doc.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                broken.append(f"{doc.name}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_repository_path_named_exists():
    missing = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for path in REPO_PATH.findall(line):
                # a module may become a package of the same name: either spelling is the same thing
                if not any((ROOT / p).exists() for p in (path, path + ".py")):
                    missing.append(f"{doc.name}:{n}: {path}")
    assert not missing, "\n".join(missing)


def where_things_live() -> dict[str, str]:
    """docs/design.md's "Where things live" table: each path of a row's first cell -> the row's text."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) >= 3:
            for path in re.findall(r"`([^`]+)`", cells[1]):
                rows[path.rstrip("/")] = cells[2]
    return rows


def _named(module: str, text: str) -> bool:
    return re.search(rf"(?<![\w/]){re.escape(module)}(\.py)?(?![\w])", text) is not None


def test_design_names_every_folder_and_module_of_the_tree():
    """Every folder of the packages has its row in docs/design.md's table (a folder inside
    another may be described in its parent's row, as `reclaim/`), and every module is named in
    its folder's row; every row is a folder of the tree. As the README is tested against the tree."""
    rows = where_things_live()
    missing = []
    folders = sorted({p.parent for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts})
    for folder in folders:
        rel = folder.relative_to(ROOT).as_posix()
        row = rows.get(rel)
        if row is None:  # described in its parent's row
            parent = rows.get(folder.parent.relative_to(ROOT).as_posix(), "")
            if f"`{folder.name}/`" not in parent:
                missing.append(f"{rel}/: no row, nor `{folder.name}/` in its parent's")
                continue
            row = parent
        for module in sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__"):
            if not _named(module, row):
                missing.append(f"{rel}/{module}.py: not named in the row of {rel}/")
    for path in rows:
        if path.split("/")[0] in PACKAGES and not (ROOT / path).is_dir():
            missing.append(f"row {path}/: no such folder")
    assert not missing, "docs/design.md's table is out of date:\n" + "\n".join(missing)

"""Docs that run: every command, code snippet and output layout in docs/ is run
or checked here, as the README's are (tests/test_readme.py); tests/test_docs.py checks every
repository path and link. docs/reference.md is generated from the code and checked against it.

- Every `rdasim ...` and `python ...` command, in a code block or inline: the command exists and
  takes every flag named; a concrete one parses, and the config it names exists and loads with
  its --set lines (a synopsis, with placeholders such as CONFIG.toml or [--out DIR], only the
  flags). The code-block ones also run, from a directory of their own, and end as their comment
  says ("exits 4"); those slower than a few seconds are marked slow, each beside the benchmark
  that runs the same code (``SLOW``).
- Every Python snippet runs (against a results tree made here, as the snippets read one); a
  snippet needing an optional reader that is not installed (pandas, Polars, DuckDB) and the
  design doc's sketch of a policy are compiled, their names checked. SQL runs in DuckDB.
- Every TOML snippet and output layout is compared with what the code reads and writes.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

DOCS = [d for d in sorted((ROOT / "docs").glob("*.md")) if d.name != "reference.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# docs whose Python cells another test runs, in order, in one namespace (a notebook's cells)
CELLS_RUN_ELSEWHERE = {"api.md": "tests/rdasim/test_walkthrough.py"}
PLACEHOLDER = re.compile(r"\[|\||\.\.\.|<|\b[A-Z][A-Z_]*[A-Z](?:\.\w+)?\b|\bN\b|\bS\b")

# block commands slower than a few seconds, with the benchmark that runs the same code
SLOW = {
    "rdasim run examples/kv_decode.toml": "chip_speed.py (this run, both NoC models)",
    "rdasim run examples/moe_mixtral.toml --shards 4 --backend ray --out results/mixtral":
        "oversubscribed.py (moe_mixtral on Ray shards); tests/test_readme.py runs it with -m slow",
    "rdasim run examples/spec_decode.toml --trace spec.json --memory-map 20000 --out results/spec":
        "memory_policies.py (decode runs); tests/cluster/commands/test_run.py traces a short one",
    "rdasim run examples/mapped_gpt_layer.toml --json": "mapped_vs_analytic.py (the mapped examples)",
    "rdasim run examples/mapped_gpt_layer.toml --set workload.dataflow.plan=plan/plan.json --out results/mapped":
        "mapped_vs_analytic.py (the mapped examples)",
    "rdasim map examples/map_gpt_layer.toml --out plan/": "mapping_presets.py (the solver)",
    "rdasim run examples/mapped_decode_sn40l.toml": "real_scale.py (the mapped decode) and result_hashes.py",
    "rdasim run examples/mapped_decode_sn40l.toml --set workload.dataflow.weights=ddr":
        "real_scale.py (the model switch); tests/sim/workloads/dataflow/test_tiers.py switches a small one",
    "rdasim noc --backend ray": "noc_speed.py and result_hashes.py (the reference curve)",
    "rdasim noc --rates 0.1,0.3,0.4 --out results/noc": "result_hashes.py (noc 8x8 config B)",
    "rdasim noc --k 16 --rate 0.15 --shards 4 --cut blocks": "noc_speed.py (16x16), pdes_speed.py",
    "rdasim noc --k 32 --rate 0.075 --shards 2 --backend ray": "noc_speed.py and pdes_speed.py (noc32)",
    "rdasim noc examples/noc_torus.toml --set noc.traffic=transpose": "result_hashes.py (noc 4x4 torus transpose)",
    "rdasim explore examples/explore_kv.toml --out results/kv --budget 90": "explore_quality.py",
    "rdasim sweep status results/kv": "explore_quality.py",
    "rdasim report results/kv": "explore_quality.py; tests/cluster/explore/test_report.py",
    "rdasim sweep examples/sweep_noc.toml --out results": "sweep_overhead.py; tests/test_readme.py with -m slow",
    "rdasim sweep status results": "sweep_overhead.py; tests/test_readme.py with -m slow",
    "rdasim report results": "tests/cluster/report (figures from sweeps)",
    "rdasim run examples/serve_llama8b_sn40l.toml": "serve_real_time.py (this run, every memory policy and on_oom)",
    "rdasim run examples/serve_llama70b_sn40l8.toml": "tests/sim/workloads/serve/test_system.py serves a small group",
    "rdasim evaluate --quick --out evaluation": "evaluation.py (this run, cold, timed); tests/cluster/evaluate",
    "rdasim evaluate --out evaluation": "evaluation.py --full (it resumes)",
    "rdasim evaluate --out evaluation --address auto": "evaluation.py --full; tests/cluster/evaluate on Ray",
}


@dataclass(frozen=True)
class Command:
    doc: str
    line: str  # the command without its comment
    block: int | None  # the code block it is in (None: inline in the text)
    comment: str = ""

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.line)

    @property
    def synopsis(self) -> bool:
        return bool(PLACEHOLDER.search(self.line))

    @property
    def status(self) -> int:
        m = re.search(r"\bexits? (\d+)", self.comment)
        return int(m.group(1)) if m else 0


def _blocks(doc: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(doc.read_text())]


def _commands(doc: Path) -> list[Command]:
    out = []
    for b, (lang, body) in enumerate(_blocks(doc)):
        if lang not in ("", "sh", "bash"):
            continue
        text = re.sub(r"\\\n\s*", " ", body)  # continued lines
        for raw in text.splitlines():
            s = raw.strip()
            if s.startswith(("rdasim ", "python ")):
                line, _, comment = s.partition(" #")
                out.append(Command(doc.name, line.strip(), b, comment))
    prose = " ".join(FENCE.sub("", doc.read_text()).split())  # inline spans may wrap lines
    for span in re.findall(r"`((?:rdasim (?:[a-z]|--)|python [-a-z])[^`]*)`", prose):  # not `rdasim -> cluster`
        out.append(Command(doc.name, span.strip(), None))
    return out


COMMANDS = [c for d in DOCS for c in _commands(d)]


def _ids(cs):
    return [f"{c.doc}: {c.line}" for c in cs]


def _options(parser) -> set[str]:
    return set(parser._option_string_actions)


def _subparser(argv: list[str]):
    """The parser of the (sub)command ``argv`` starts with (``alloc plan`` is alloc's ``plan``),
    and how many words name it."""
    from cluster.cli import build_parser

    parser, depth = build_parser([argv[0]]), 0
    for word in argv:
        sub = next((a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"), None)
        if sub is None or word not in sub.choices:
            break
        parser, depth = sub.choices[word], depth + 1
    return parser, depth


def test_the_docs_have_commands_and_snippets():
    assert len(COMMANDS) > 60 and any(c.block is not None for c in COMMANDS)


def test_no_doc_names_a_table_as_one_file():
    """Since the per-table layout each table is a directory of files (DIR/run_summary/run=<id>/...):
    a doc naming `run_summary.parquet` sends a reader to a file that is not there."""
    from cluster.results.schemas import ALL_TABLES

    names = "|".join(t.name for t in ALL_TABLES)
    found = [f"{d.name}: {m}" for d in DOCS + [ROOT / "README.md"]
             for m in re.findall(rf"(?<![\w.*/])(?:{names})\.parquet\b", d.read_text())]
    assert not found, found


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.argv[0] == "rdasim"],
                         ids=_ids([c for c in COMMANDS if c.argv[0] == "rdasim"]))
def test_every_rdasim_command_is_one_the_cli_takes(command: Command):
    from cluster.cli import SUBCOMMANDS, build_parser
    from cluster.errors import UserError

    argv = command.argv[1:]
    if argv and argv[0].startswith("--"):  # rdasim --version
        assert argv[0] in _options(build_parser([]))
        return
    assert argv and argv[0] in SUBCOMMANDS, command.line
    flags = {t.split("=")[0] for t in re.split(r"[\s\[\]|]+", command.line) if t.startswith("--")}
    parser, depth = _subparser(argv)
    known = _options(parser)
    assert flags <= known, f"{command.line}: no such flag {sorted(flags - known)}"
    if command.synopsis or len(argv) == depth or (command.block is None and argv[-1].startswith("--")):
        return  # a synopsis, or the text naming a command or one of its flags
    try:
        args = build_parser([argv[0]]).parse_args(argv)
    except UserError as exc:
        pytest.fail(f"{command.line}: {exc}")
    config = getattr(args, "config", None)
    if config and config.startswith("examples/"):
        _loads(argv[0], ROOT / config, getattr(args, "overrides", []))


def _loads(command: str, path: Path, overrides: list[str]) -> None:
    """The config exists and loads (every key known, every --set value accepted)."""
    assert path.is_file(), path
    from cluster.config import load

    if command == "run":
        from cluster.config.run import RUN_SCHEMA as schema
    elif command == "noc":
        from cluster.config.noc import NOC_SCHEMA as schema
    elif command == "map":
        from cluster.config.map import resolve

        resolve(str(path), overrides, None, [])
        return
    else:
        return
    load(schema, path, [o for o in overrides if not o.startswith("workload.dataflow.plan=")])


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.argv[0] == "python"],
                         ids=_ids([c for c in COMMANDS if c.argv[0] == "python"]))
def test_every_python_command_names_a_script_and_its_flags(command: Command):
    argv = command.argv[1:]
    if argv[0] == "-m":
        assert importlib.util.find_spec(argv[1]) is not None, command.line
        return
    script = ROOT / argv[0]
    assert script.is_file(), command.line
    text = script.read_text()
    flags = {t.split("=")[0] for t in re.split(r"[\s\[\]|]+", command.line) if t.startswith("--")}
    missing = [f for f in flags if f'"{f}"' not in text]
    assert not missing, f"{command.line}: {script.name} takes no {missing}"


# ------------------------------------------------------------------ the code blocks' commands, run

RUNNABLE = [c for c in COMMANDS if c.block is not None and c.argv[0] == "rdasim" and not c.synopsis]


def test_every_slow_command_is_in_the_docs():
    assert set(SLOW) <= {c.line for c in RUNNABLE}


def _out_dir(argv: list[str]) -> str | None:
    return argv[argv.index("--out") + 1].rstrip("/") if "--out" in argv else None


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    return subprocess.run([sys.executable, "-m", "cluster.cli", *argv[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def block_dirs() -> dict:
    return {}


@pytest.mark.parametrize("command", [pytest.param(c, marks=[pytest.mark.slow] if c.line in SLOW else [])
                                     for c in RUNNABLE], ids=_ids(RUNNABLE))
def test_every_block_command_runs_as_stated(command: Command, block_dirs, tmp_path_factory):
    key = (command.doc, command.block)
    if key not in block_dirs:
        d = tmp_path_factory.mktemp(f"{command.doc.split('.')[0]}{command.block}")
        for name in ("examples", "tests", "benchmarks"):  # a checkout's folders the examples read from
            (d / name).symlink_to(ROOT / name)
        block_dirs[key] = d
    cwd = block_dirs[key]
    earlier = [c for c in RUNNABLE if (c.doc, c.block) == key]
    mine = _out_dir(command.argv)
    reads = [p for a in command.argv[1:] if a.rstrip("/") != mine for p in re.split(r"[=,]", a)]
    for need in earlier[:earlier.index(command)]:  # what it reads: the block's earlier --out
        out = _out_dir(need.argv)
        if out and any(p.rstrip("/") == out or p.startswith(out + "/") for p in reads) and not (cwd / out).exists():
            assert _run(need.argv, cwd).returncode == need.status, need.line
    p = _run(command.argv, cwd)
    assert p.returncode == command.status, f"{command.line}\nexit {p.returncode}\n{p.stderr[-3000:]}"


# ------------------------------------------------------------------ snippets and layouts

@pytest.fixture(scope="module")
def results_tree(tmp_path_factory) -> Path:
    """A results tree as the docs' snippets read one: a noc run, a decode run, a sweep named
    noc-latency (examples/sweep_noc.toml's name and partitions, a few short points) and its figures."""
    d = tmp_path_factory.mktemp("results_tree")
    (d / "examples").symlink_to(ROOT / "examples")
    quick = ["--set", "noc.warmup_cycles=100", "--set", "noc.measure_cycles=200", "--quiet"]
    spec = (ROOT / "examples" / "sweep_noc.toml").read_text()
    spec = re.sub(r"(?ms)^\[base\].*?(?=^\[axes\])", "[base]\nnoc.k = 4\nnoc.warmup_cycles = 100\n"
                  "noc.measure_cycles = 200\n\n", spec)
    spec = re.sub(r"(?ms)^\[axes\].*", '[axes]\nnoc.topology = ["mesh"]\nnoc.traffic = ["uniform", "transpose"]\n'
                  "noc.rate = [0.1, 0.2]\n", spec)
    (d / "sweep_small.toml").write_text(spec)
    for argv in (["rdasim", "noc", "--k", "4", "--rates", "0.1,0.3", "--out", "results/noc", *quick],
                 ["rdasim", "run", "examples/kv_decode.toml", "--set", "workload.decode.requests=2", "--set",
                  "workload.decode.max_batch=2", "--out", "results/kv", "--quiet"],
                 ["rdasim", "sweep", "sweep_small.toml", "--out", "results", "--in-process", "--quiet"],
                 ["rdasim", "report", "results", "--quiet"]):
        p = _run(argv, d)
        assert p.returncode == 0, f"{' '.join(argv)}: {p.stderr[-2000:]}"
    shutil.copytree(d / "results", d / "compacted" / "results")  # the same sweep, its point files compacted
    p = _run(["rdasim", "sweep", "compact", "compacted/results"], d)
    assert p.returncode == 0, p.stderr[-2000:]
    return d


SNIPPETS = [(d.name, i, lang, body) for d in DOCS for i, (lang, body) in enumerate(_blocks(d))
            if lang in ("python", "sql", "toml")]


def _missing_modules(code: str) -> list[str]:
    names = re.findall(r"^\s*(?:import|from) (\w+)", code, re.M)
    return [n for n in names if importlib.util.find_spec(n) is None]


@pytest.mark.parametrize("doc,index,lang,body", SNIPPETS,
                         ids=[f"{d}: block {i} ({lang})" for d, i, lang, _ in SNIPPETS])
def test_every_snippet_runs(doc, index, lang, body, results_tree, tmp_path):
    if lang == "toml":
        _check_toml(doc, body, tmp_path)
        return
    if lang == "sql":
        duckdb = pytest.importorskip("duckdb")
        con = duckdb.connect()
        os.chdir(results_tree)
        try:
            assert con.sql(body.replace(";", "")).fetchall()
        finally:
            os.chdir(ROOT)
        return
    compile(body, f"{doc} block {index}", "exec")
    if doc in CELLS_RUN_ELSEWHERE:
        assert (ROOT / CELLS_RUN_ELSEWHERE[doc]).is_file()
        return
    if doc == "design.md":  # a sketch of a new policy: every name it uses is where the doc says
        from dataclasses import dataclass  # noqa: F401
        from typing import ClassVar  # noqa: F401

        from sim.keys import Field, Issue  # noqa: F401
        from sim.memory.policies import POLICIES, StorageBase  # noqa: F401
        return
    if _missing_modules(body):
        return  # compiled: the optional reader (pip install -e '.[analysis]') is not here
    code, cwd = body, results_tree
    if doc == "allocators.md":  # a MiniMalloc instance: the one the repository carries, a short budget
        cwd = tmp_path
        shutil.copy(ROOT / "tests" / "data" / "minimalloc" / "G.1048576.csv", cwd / "A.1048576.csv")
        code = code.replace("budget=60", "budget=2")
    if doc == "traces.md":  # the conversion, on a small file in the Azure format
        from sim.serving.trace import format_azure

        cwd = tmp_path
        t0 = 1_700_000_000 * 10**9
        (cwd / "AzureLLMInferenceTrace_conv_1week.csv").write_text(
            format_azure([t0 + i * 250_000_000 for i in range(40)], [100 + i for i in range(40)], [5] * 40))
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{doc} block {index}:\n{p.stderr[-3000:]}"
    if doc == "traces.md":  # the Parquet it writes is a trace rdasim reads, with every request
        from sim.serving.trace_window import read_window

        assert len(read_window(cwd / "conv_1week.parquet", 0.0, 0.0, 0).rows.t_ns) == 40


def _check_toml(doc: str, body: str, tmp_path: Path) -> None:
    import tomllib

    if doc == "sweeps.md":  # the spec's keys, with the inline base (the file form is the other spelling)
        from cluster.sweep.spec import parse_spec

        raw = tomllib.loads(re.sub(r'(?m)^base = ".*$', "", body))
        _, issues = parse_spec(raw, tmp_path, "docs/sweeps.md")
        assert not issues, issues
        return
    if doc == "traces.md":  # a moe config replaying STeP's published folder
        from cluster.config import load
        from cluster.config.run import RUN_SCHEMA, chip_config

        moe = tomllib.loads(body)["workload"]["moe"]
        routing = ROOT / "benchmarks" / "data" / "step" / "dyn_tiling" / "expert_routing"
        moe["trace"] = str(routing / Path(moe["trace"]).name)
        raw = tomllib.loads((ROOT / "examples" / "moe_trace.toml").read_text())
        raw["workload"]["moe"].update(moe)
        assert chip_config(load(RUN_SCHEMA, raw=raw)).workload.trace.steps == 1
        return
    tomllib.loads(body)


LAYOUTS = [(doc, i) for doc in ("results.md", "sweeps.md", "explore.md")
           for i, (lang, body) in enumerate(_blocks(ROOT / "docs" / doc))
           if lang == "" and body.lstrip().startswith(("results/", "DIR/"))]


def test_the_layouts_are_found():
    assert [doc for doc, _ in LAYOUTS] == ["results.md", "sweeps.md", "explore.md"]


def _patterns(body: str) -> list[str]:
    """Path patterns of a layout block: each line's first word, under its parents by indentation."""
    out, stack = [], []
    for raw in body.splitlines():
        raw = re.sub(r"<[^>]+>", lambda m: m.group(0).replace(" ", "_"), raw)  # <run id>: one word
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip())
        word = raw.split()[0]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([s[1].rstrip("/") for s in stack] + [word])
        stack.append((indent, word))
        out.append(path)
    return out


def _glob(pattern: str) -> str:
    """A documented path as a glob: <placeholder> and ... are any name or names."""
    return re.sub(r"<[^>]+>", "*", pattern).replace("/.../", "/**/")


@pytest.mark.parametrize("doc,index", LAYOUTS)
def test_every_output_layout_is_what_is_written(doc, index, results_tree, tmp_path_factory):
    body = _blocks(ROOT / "docs" / doc)[index][1]
    if doc == "explore.md":
        root = _explored(tmp_path_factory)
        pats = [p.replace("DIR/", "", 1) for p in _patterns(body)]
    elif doc == "sweeps.md":
        root = results_tree / "results"
        pats = [p.replace("DIR/", "", 1).replace("<name>", "noc-latency") for p in _patterns(body)[1:]]
        pats = [p.replace("<result_table>", "noc_summary").replace("<table>", "noc_summary") if "<result_table>" in p
                else p.replace("<table>", "noc_links") for p in pats]
    else:
        root = results_tree
        pats = _patterns(body)
    files = [str(f.relative_to(root)) for f in root.rglob("*")]
    # a compacted file is what a compacted sweep holds (the fixture's copy of the sweep, compacted)
    compacted = root.parent / "compacted" / root.name if doc == "sweeps.md" else results_tree / "compacted"
    packed = [str(f.relative_to(compacted)) for f in compacted.rglob("*")] if compacted.is_dir() else []
    for pat in pats:
        g = _glob(pat)
        seen = packed if "compact-" in pat else files
        assert any(fnmatch.fnmatch(f, g) or fnmatch.fnmatch(f + "/", g) for f in seen), \
            f"{doc}: nothing written matches {pat}"


def _explored(tmp_path_factory) -> Path:
    """A two-trial exploration of a small space, in-process."""
    d = tmp_path_factory.mktemp("explore")
    (d / "spec.toml").write_text('''
[base]
chip.preset = "plasticine"
chip.rows = 4
chip.cols = 4
noc.model = "packet"
workload.kind = "kv-decode"
workload.decode.requests = 2
workload.decode.max_batch = 2
workload.decode.layers = 1
workload.decode.prompt_tokens = {dist = "fixed", mean = 16}
workload.decode.output_tokens = {dist = "fixed", mean = 4}

[explore]
optimizer = "random"
budget = 2
parallel = 1

[explore.space]
"memory.policy" = {type = "categorical", values = ["virtual", "static-single"]}

[[explore.objectives]]
metric = "tokens_per_second"
direction = "maximize"
''')
    p = _run(["rdasim", "explore", "spec.toml", "--out", "out", "--in-process", "--quiet"], d)
    assert p.returncode == 0, p.stderr[-2000:]
    return d / "out"

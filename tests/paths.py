"""Where the repository's files are, for tests at any depth of tests/."""

import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TEST_DATA = ROOT / "tests" / "data"


def benchmark(name: str):
    """benchmarks/<name>.py as a module: a test that checks a benchmark's own cases imports them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# two points of a run sweep over the over-committed trace, both completing (about a second each)
SMALL_RUN_SWEEP = """
    [sweep]
    name = "kv"
    command = "run"
    [axes]
    memory.on_oom = ["preempt"]
    workload.decode.requests = [2, 3]
"""


def pressure_sweep(directory: Path, body: str = SMALL_RUN_SWEEP) -> Path:
    """directory/s.toml: a sweep spec whose base is examples/kv_decode_pressure.toml (its runs end every way)."""
    spec = directory / "s.toml"
    spec.write_text(f'base = "{EXAMPLES / "kv_decode_pressure.toml"}"\n' + textwrap.dedent(body))
    return spec

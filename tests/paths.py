"""Where the repository's files are, for tests at any depth of tests/."""

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

"""Where the repository's files are, for tests at any depth of tests/."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TEST_DATA = ROOT / "tests" / "data"

"""No function of the packages runs past 80 lines (the house style: a function one job, read
at a glance); a longer one is named with its length and where it starts."""

from __future__ import annotations

import ast

from tests.paths import ROOT

PACKAGES = ("sim", "mapping", "allocators", "cluster", "rdasim")
LIMIT = 80


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function in ``source`` longer than ``limit`` lines,
    from its ``def`` to its last statement (decorators not counted)."""
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_the_count_is_of_lines_from_def_to_the_last_statement():
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    assert long_functions(f"def short():\n{body[: body.rindex(chr(10))]}\n") == []  # 80 lines with its def
    assert long_functions(f"@cache\ndef long():\n{body}\n") == [("long", 2, 81)]
    assert long_functions(f"class C:\n    def m(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n") == [
        ("m", 2, 81)]


def test_no_function_of_the_packages_runs_past_80_lines():
    found = [f"{path.relative_to(ROOT)}:{line} {name} ({n} lines)" for package in PACKAGES
             for path in sorted((ROOT / package).rglob("*.py"))
             for name, line, n in long_functions(path.read_text())]
    assert not found, "functions over 80 lines:\n" + "\n".join(found)

"""Known constraints: boolean expressions on config keys, read with ``ast`` and evaluated by a walker.

    "chip.mu_bytes * chip.rows * chip.cols <= 64MiB"
    "memory.block_bytes <= chip.mu_bytes / 8 and memory.policy != 'static-single'"

Only numbers, strings, size literals (64MiB, 4KiB, 1.5GB: the config's units), dotted config
keys, arithmetic (+ - * / // % **), comparisons (chained too), and/or/not, parentheses and
min/max/abs are allowed: the walker evaluates those nodes and nothing else, so an expression
cannot run code. A key is read from the trial's resolved config, so sizes written "8KiB" in
the space compare as bytes.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from cluster.config.units import UnitError, parse_size

_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([KMGTP]i?B)\b")
_BINARY: dict[type, Callable] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                                 ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
                                 ast.Pow: operator.pow}
_COMPARE: dict[type, Callable] = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
                                  ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCTIONS: dict[str, Callable] = {"min": min, "max": max, "abs": abs}


class ConstraintError(ValueError):
    """An expression that is not a constraint this module can read."""


@dataclass(frozen=True)
class Constraint:
    """A parsed known constraint: its text, its tree and the config keys it reads."""

    text: str
    tree: ast.Expression
    keys: tuple[str, ...]

    def holds(self, lookup: Callable[[str], object]) -> bool:
        """Whether the constraint holds, reading each key through ``lookup`` (a resolved config)."""
        return bool(_eval(self.tree.body, lookup))


def _sizes(text: str) -> str:
    """'64MiB' -> '67108864' (a size literal is not Python): the config's own unit reader."""
    def whole(m: re.Match) -> str:
        try:
            return str(parse_size(m.group(1) + m.group(2)))
        except UnitError as exc:
            raise ConstraintError(str(exc)) from None
    return _SIZE.sub(whole, text)


def _dotted(node: ast.AST) -> str | None:
    """'chip.mu_bytes' from Attribute(Name('chip'), 'mu_bytes'); None if the node is not a dotted name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head is not None else None
    return None


def _check(node: ast.AST, keys: list[str]) -> None:
    """Reject every node the evaluator does not know; collect the dotted keys."""
    key = _dotted(node)
    if key is not None:
        if key in _FUNCTIONS:
            raise ConstraintError(f"{key} is a function: call it, e.g. {key}(a, b)")
        keys.append(key)
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)) \
            and not isinstance(node.value, bool):
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, keys)
        _check(node.right, keys)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
        _check(node.operand, keys)
    elif isinstance(node, ast.BoolOp):
        for v in node.values:
            _check(v, keys)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        for v in [node.left, *node.comparators]:
            _check(v, keys)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
            and not node.keywords and node.args:
        for a in node.args:
            _check(a, keys)
    else:
        raise ConstraintError(f"{ast.unparse(node)!r} is not allowed (numbers, sizes, config keys, arithmetic, "
                              "comparisons, and/or/not, min/max/abs)")


def parse_constraint(text: str) -> Constraint:
    """Parse a known constraint; raise ConstraintError saying why it cannot be read."""
    if not isinstance(text, str) or not text.strip():
        raise ConstraintError("expected an expression such as \"chip.mu_bytes * chip.rows * chip.cols <= 64MiB\"")
    try:
        tree = ast.parse(_sizes(text.strip()), mode="eval")
    except SyntaxError as exc:
        raise ConstraintError(f"cannot parse {text!r}: {exc.msg}") from None
    if not isinstance(tree.body, (ast.Compare, ast.BoolOp)) and not (
            isinstance(tree.body, ast.UnaryOp) and isinstance(tree.body.op, ast.Not)):
        raise ConstraintError(f"{text!r} is not a condition: compare something, e.g. a <= b")
    keys: list[str] = []
    _check(tree.body, keys)
    return Constraint(text, tree, tuple(dict.fromkeys(keys)))


def _eval(node: ast.AST, lookup: Callable[[str], object]):
    key = _dotted(node)
    if key is not None:
        return lookup(key)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, lookup), _eval(node.right, lookup))
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, lookup)
        return (not value) if isinstance(node.op, ast.Not) else (-value if isinstance(node.op, ast.USub) else +value)
    if isinstance(node, ast.BoolOp):
        values = (bool(_eval(v, lookup)) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, lookup)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, lookup)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)  # _check allowed nothing else
    return _FUNCTIONS[node.func.id](*(_eval(a, lookup) for a in node.args))

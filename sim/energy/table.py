"""Per-action energy tables: a TOML file of what one action of each component costs.

A table names, for every action the simulator counts (``ACTIONS``), the energy of one
action with its unit ("1.5pJ", "31.2 pJ", "0.02nJ"), what one action is, the technology
node the figure belongs to and its published source. The default table
(``default_45nm.toml`` beside this module) is replaceable: ``energy.table = "FILE"`` in a
run config names another file with the same actions, e.g. figures exported from Accelergy.
Reading checks every entry and reports all problems at once (``EnergyTableError``).
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DEFAULT_TABLE = Path(__file__).with_name("default_45nm.toml")

# (component, action) -> what one counted action is (the unit its count is in)
ACTIONS: dict[tuple[str, str], str] = {
    ("cu", "fu_op"): "one functional-unit operation: one lane of one pipeline stage for one cycle",
    ("mu", "read_byte"): "one byte read from an MU's SRAM",
    ("mu", "write_byte"): "one byte written to an MU's SRAM",
    ("mu", "translation"): "one block-table lookup (virtual policy, once per access)",
    ("realloc_copy", "byte"): "one byte moved inside an MU by realloc-copy growth (a read and a write)",
    ("noc_router", "flit_bit"): "one bit of a flit through one router",
    ("noc_link", "flit_bit"): "one bit of a flit over one router-to-router link",
    ("dram", "read_byte"): "one byte read from DRAM",
    ("dram", "write_byte"): "one byte written to DRAM",
    ("hbm", "read_byte"): "one byte read from an HBM tier",
    ("hbm", "write_byte"): "one byte written to an HBM tier",
    ("ddr", "read_byte"): "one byte read from a DDR tier",
    ("ddr", "write_byte"): "one byte written to a DDR tier",
    ("protocol", "message"): "one message without data handled by its receiver (a bookkeeping update)",
}
COMPONENTS: tuple[str, ...] = tuple(dict.fromkeys(c for c, _ in ACTIONS))
ENTRY_KEYS = ("energy", "per", "node", "source")

_TO_PJ = {"fJ": 1e-3, "pJ": 1.0, "nJ": 1e3, "uJ": 1e6, "µJ": 1e6, "mJ": 1e9, "J": 1e12}
_ENERGY = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Zµ]+)\s*$")


class EnergyTableError(ValueError):
    """An energy table that cannot be used; ``problems`` lists every one."""

    def __init__(self, source: str, problems: list[str]):
        super().__init__(f"{source}: " + "; ".join(problems))
        self.source = source
        self.problems = problems


@dataclass(frozen=True)
class ActionEnergy:
    """One row of a table: the energy of one action of one component."""

    component: str
    action: str
    pj: float  # energy of one action, picojoules
    per: str  # what one action is, in the table's words
    node: str  # technology node of the figure
    source: str  # where the figure comes from


@dataclass(frozen=True)
class EnergyTable:
    name: str
    technology: str
    entries: tuple[ActionEnergy, ...]

    def pj(self, component: str, action: str) -> float:
        for e in self.entries:
            if e.component == component and e.action == action:
                return e.pj
        raise KeyError(f"energy table {self.name!r} has no {component}.{action}")


def parse_energy(value) -> float:
    """Picojoules from "1.5pJ", "31.2 pJ", "0.02nJ", "40fJ" (a bare number is refused: say the unit)."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"expected an energy with its unit, e.g. \"1.5pJ\", got {value!r}")
    m = _ENERGY.match(value)
    if not m or m.group(2) not in _TO_PJ:
        raise ValueError(f"cannot read {value!r} as an energy (units: {', '.join(_TO_PJ)})")
    pj = float(m.group(1)) * _TO_PJ[m.group(2)]
    if not math.isfinite(pj) or pj < 0:
        raise ValueError(f"{value!r}: an energy must be finite and not negative")
    return pj


def table_from_dict(raw: dict, source: str) -> EnergyTable:
    """An EnergyTable from a parsed TOML document; EnergyTableError lists every problem."""
    problems: list[str] = []
    head = raw.get("table", {})
    if not isinstance(head, dict):
        head, problems = {}, ["[table] must be a table with name and technology"]
    known = {c: {a for cc, a in ACTIONS if cc == c} for c in COMPONENTS}
    entries: dict[tuple[str, str], ActionEnergy] = {}
    for comp, actions in raw.items():
        if comp == "table":
            continue
        if comp not in known:
            problems.append(f"unknown component [{comp}]{_hint(comp, known)}")
            continue
        if not isinstance(actions, dict):
            problems.append(f"[{comp}] must be a table of actions")
            continue
        for action, entry in actions.items():
            where = f"{comp}.{action}"
            if action not in known[comp]:
                problems.append(f"unknown action {where}{_hint(action, known[comp])}")
                continue
            if not isinstance(entry, dict):
                problems.append(f"{where} must be a table with energy, per, node, source")
                continue
            extra = [k for k in entry if k not in ENTRY_KEYS]
            if extra:
                problems.append(f"{where}: unknown key(s) {', '.join(extra)} (expected {', '.join(ENTRY_KEYS)})")
            missing = [k for k in ENTRY_KEYS if not isinstance(entry.get(k), str)]
            if missing:
                problems.append(f"{where}: needs {', '.join(missing)} (strings)")
                continue
            try:
                pj = parse_energy(entry["energy"])
            except ValueError as exc:
                problems.append(f"{where}.energy: {exc}")
                continue
            entries[(comp, action)] = ActionEnergy(comp, action, pj, entry["per"], entry["node"], entry["source"])
    absent = [f"{c}.{a}" for c, a in ACTIONS if (c, a) not in entries and c in raw]
    absent += [f"{c}.*" for c in COMPONENTS if c not in raw]
    if absent:
        problems.append(f"missing: {', '.join(absent)}")
    if problems:
        raise EnergyTableError(source, problems)
    return EnergyTable(str(head.get("name", source)), str(head.get("technology", "")),
                       tuple(entries[k] for k in ACTIONS))


def load_table(path: str | Path | None = None) -> EnergyTable:
    """The table in ``path`` (the default table when None or empty)."""
    p = Path(path) if path else DEFAULT_TABLE
    if not p.is_file():
        raise EnergyTableError(str(p), ["no such file"])
    try:
        with p.open("rb") as fh:
            raw = tomllib.load(fh)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise EnergyTableError(str(p), [f"not valid TOML: {exc}"]) from None
    return table_from_dict(raw, str(p))


@lru_cache(maxsize=1)
def default_table() -> EnergyTable:
    """The packaged default table (read once per process; it never changes)."""
    return load_table(None)


def _hint(name: str, choices) -> str:
    close = difflib.get_close_matches(name, sorted(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""

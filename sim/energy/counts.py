"""Action counts of a run and their energy: counts x the per-action table.

``ActionCounts`` is what the chip did, summed over its units and shards, in the units the
table prices (bytes, operations, flit bits, messages). Each field names its (component,
action) in its metadata, so the record, the table and the exported action counts agree on
one list (sim/energy/table.py, ``ACTIONS``). ``energy`` multiplies; every component's energy
is the sum of its actions' and the total the sum of the components' (``math.fsum``).
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass, field, fields

from sim.energy.table import ACTIONS, COMPONENTS, EnergyTable


def _count(component: str, action: str):
    assert (component, action) in ACTIONS, (component, action)
    return field(default=0, metadata={"component": component, "action": action})


@dataclass(frozen=True, slots=True)
class ActionCounts:
    """Actions of one run (or one shard), per component."""

    cu_fu_ops: int = _count("cu", "fu_op")  # lane-cycles x pipeline stages
    mu_read_bytes: int = _count("mu", "read_byte")
    mu_write_bytes: int = _count("mu", "write_byte")
    mu_translations: int = _count("mu", "translation")
    copy_bytes: int = _count("realloc_copy", "byte")
    router_flit_bits: int = _count("noc_router", "flit_bit")  # flits x routers each passed x flit bits
    link_flit_bits: int = _count("noc_link", "flit_bit")  # flits x links each crossed x flit bits
    dram_read_bytes: int = _count("dram", "read_byte")
    dram_write_bytes: int = _count("dram", "write_byte")
    hbm_read_bytes: int = _count("hbm", "read_byte")  # memory tiers (sim/chip/tier_controller.py)
    hbm_write_bytes: int = _count("hbm", "write_byte")
    ddr_read_bytes: int = _count("ddr", "read_byte")
    ddr_write_bytes: int = _count("ddr", "write_byte")
    protocol_messages: int = _count("protocol", "message")

    def items(self) -> list[tuple[str, str, int]]:
        """(component, action, count) of every counted action, in ``ACTIONS`` order."""
        return [(f.metadata["component"], f.metadata["action"], int(getattr(self, f.name))) for f in fields(self)]

    def add(self, other: "ActionCounts") -> "ActionCounts":
        return ActionCounts(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def scaled(self, k: int) -> "ActionCounts":
        return ActionCounts(*(a * k for a in astuple(self)))


assert [(c, a) for c, a, _ in ActionCounts().items()] == list(ACTIONS), "ActionCounts and ACTIONS disagree"


@dataclass(frozen=True)
class EnergyRow:
    component: str
    action: str
    count: int
    pj_each: float
    joules: float


@dataclass(frozen=True)
class Energy:
    """A run's dynamic energy by action, by component and in total (joules)."""

    rows: tuple[EnergyRow, ...]
    table: str  # the table's name

    def by_component(self) -> dict[str, float]:
        return {c: math.fsum(r.joules for r in self.rows if r.component == c) for c in COMPONENTS}

    @property
    def total(self) -> float:
        return math.fsum(self.by_component().values())


def energy(counts: ActionCounts, table: EnergyTable) -> Energy:
    """Energy of every counted action under ``table``."""
    rows = tuple(EnergyRow(c, a, n, table.pj(c, a), n * table.pj(c, a) * 1e-12) for c, a, n in counts.items())
    return Energy(rows, table.name)


def summary_figures(e: Energy, tokens: int, batches: int) -> dict:
    """Run-summary columns: total, per token, per batch and per component, in joules."""
    total = e.total
    out = {"energy_joules": total,
           "energy_per_token_joules": total / tokens if tokens else float("nan"),
           "energy_per_batch_joules": total / batches if batches else float("nan"),
           "energy_table": e.table}
    out.update({f"energy_{c}_joules": j for c, j in e.by_component().items()})
    return out


def table_columns(e: Energy) -> dict[str, list]:
    """The run_energy table: one row per component and action."""
    total = e.total
    return {"component": [r.component for r in e.rows], "action": [r.action for r in e.rows],
            "count": [r.count for r in e.rows], "energy_per_action_pj": [r.pj_each for r in e.rows],
            "joules": [r.joules for r in e.rows],
            "share": [r.joules / total if total > 0 else 0.0 for r in e.rows]}

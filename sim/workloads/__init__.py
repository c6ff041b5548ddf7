"""Workloads: the programs the chip's compute units run.

A workload registers its parameters class by kind in ``WORKLOADS`` (``workload.kind``).
The class declares its config keys (``SECTION``, the table under [workload] they live in,
and ``KEYS``), builds itself from that table (``from_config``, with cross-checks against
the chip), says how many work items a complete run finishes (``work_items``), and makes
the program every CU of a shard runs (``program``). A program starts tasks on CUs
(``start``) and reacts to the messages they receive (``on_message``); tasks are generators
that yield what they wait for (sim/chip/units.py). Built in: kv-decode and spec-decode
(kv_decode.py), moe (moe.py), race (race.py). Adding one is a module in this package
(docs/design.md, "Adding a workload").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generator, Protocol

from sim.keys import Issue, Table
from sim.registry import Registry

if TYPE_CHECKING:
    from mapping.chips import ChipSpec
    from mapping.placement import MuRoom
    from mapping.systems import System
    from sim.chip.messages import Message
    from sim.chip.spec import UnitLayout
    from sim.chip.units import ComputeUnit

Task = Generator[Any, Any, Any]


@dataclass(frozen=True)
class ChipContext:
    """What a workload's config is checked against: the chip, where its units are, and the
    bytes an MU allocates in under the run's memory policy."""

    spec: "ChipSpec | None"
    layout: "UnitLayout | None"
    room: "MuRoom | None" = None  # how an MU gives out room under the run's policy
    system: "System | None" = None  # the system of chips a system workload runs on

    def on_chip(self) -> "tuple[ChipSpec, UnitLayout]":
        """The chip and where its units are (always given to a chip workload; None for a system's)."""
        if self.spec is None or self.layout is None:
            raise TypeError("a chip workload's config needs the chip and its unit layout")
        return self.spec, self.layout


class WorkloadProgram(Protocol):
    """What every CU of a chip shard runs."""

    def start(self, cu: "ComputeUnit") -> Task | None:
        """The task a CU starts at cycle 0, if any."""
        ...

    def on_message(self, cu: "ComputeUnit", msg: "Message") -> Task | None:
        """The task a message that is not a reply starts on its CU, if any."""
        ...


class Workload(Protocol):
    """A registered workload's parameters (a frozen dataclass whose first field is ``kind``)."""

    @property
    def kind(self) -> str: ...

    SECTION: ClassVar[str]  # its table under [workload]
    KEYS: ClassVar[Table]

    @classmethod
    def from_config(cls, kind: str, section: dict[str, Any], chip: ChipContext, issues: list[Issue]) -> "Workload":
        """Parameters from the resolved [workload.SECTION] table; problems go to ``issues``."""
        ...

    @property
    def work_items(self) -> int:
        """Work items (requests, steps, trials) a complete run finishes."""
        ...

    @property
    def token_unit(self) -> str:
        """What the run's ``tokens`` count, and so its per-token rates (``tokens_per_second``,
        ``energy_per_token_joules``): "generated tokens", "routed tokens", "trials", ..."""
        ...

    def program(self, cfg: Any) -> WorkloadProgram: ...


WORKLOADS: Registry[type[Workload]] = Registry("workload", packages=("sim.workloads", "sim.system"))


def make_program(params: Workload, cfg: Any) -> WorkloadProgram:
    """The program object every CU of a chip shard runs."""
    return params.program(cfg)

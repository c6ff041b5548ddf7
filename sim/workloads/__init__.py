"""Workloads: the programs the chip's compute units run.

A workload registers its parameters class by kind in ``WORKLOADS`` (``workload.kind``).
The class declares its config keys (``SECTION``, the table under [workload] they live in,
and ``KEYS``), where it runs (``SYSTEM``: on a system of box chips, else on a chip's grid)
and whether it maps `rdasim map`'s graph keys itself (``MAPS_GRAPH``: its table takes them
and the config checks them). It checks the run config it cannot run with (``config_issues``),
builds itself from its table (``from_config``, with cross-checks against the chip), says
how many work items a complete run finishes (``work_items``; ``WORK_UNIT`` names them), and
makes the program every CU of a shard runs (``program``) or every box chip of a system runs
(``system_program``).
A program starts tasks on CUs (``start``) and reacts to the messages they receive
(``on_message``); tasks are generators that yield what they wait for (sim/tasks.py). The
reports ask it for its figures (``figures``, ``serving_figures``, ``input_figures``,
``system_figures``); ``PREEMPTS`` says whether it serves requests it can preempt.

A workload class subclasses ``Workload`` to take the defaults written here (no checks, no
figures, no program of the other kind); the config and the reports ask only these members,
never a workload's name. Built in: kv-decode and spec-decode (kv_decode.py), moe (moe.py),
race (race.py), dataflow (dataflow.py); the system workloads are in sim/system. Adding one
is a module in this package (docs/design.md, "Adding a workload").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from sim.keys import Issue, Table
from sim.registry import Registry
from sim.tasks import Task as Task  # re-exported: a workload's tasks are sim/tasks.py's

if TYPE_CHECKING:
    from mapping.chips import ChipSpec
    from mapping.placement import MuRoom
    from mapping.systems import System
    from sim.chip.messages import Message
    from sim.chip.spec import UnitLayout
    from sim.chip.units import ComputeUnit
    from sim.system.shard import BoxChip


@dataclass(frozen=True)
class ChipContext:
    """What a workload's config is checked against: the chip, where its units are, and the
    bytes an MU allocates in under the run's memory policy."""

    spec: "ChipSpec | None"
    layout: "UnitLayout | None"
    room: "MuRoom | None" = None  # how an MU gives out room under the run's policy
    system: "System | None" = None  # the system of chips a system workload runs on
    # the --set lines that make an MU hold a buffer of n bytes under the run's policy ("": none can)
    room_for: "Callable[[int], str] | None" = None

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


class SystemProgram(Protocol):
    """What every box chip of a system runs."""

    def start(self, chip: "BoxChip") -> Task | None:
        """The task a chip starts at cycle 0, if any."""
        ...


class Workload(Protocol):
    """A registered workload's parameters (a frozen dataclass whose first field is ``kind``).

    Members with a body here are defaults a subclass takes; ``SYSTEM`` and ``MAPS_GRAPH``
    have none: every workload says where it runs and whether it maps a graph."""

    @property
    def kind(self) -> str: ...

    SECTION: ClassVar[str]  # its table under [workload]
    KEYS: ClassVar[Table]
    SYSTEM: ClassVar[bool]  # runs on a system of box chips (needs a [system]), not on one chip's grid
    MAPS_GRAPH: ClassVar[bool]  # may map `rdasim map`'s graph keys itself (its table takes them; they are checked)
    WORK_UNIT: ClassVar[str] = "work items"  # what its work items are called in messages ("sequences", "steps")
    PREEMPTS: ClassVar[bool] = False  # serves requests it can preempt (memory.on_oom = "preempt", admit_watermark)

    @classmethod
    def config_issues(cls, run: dict[str, Any]) -> list[Issue]:
        """What in the resolved ``rdasim run`` config this workload cannot run with, found before
        ``from_config`` (which may map a graph). None by default."""
        return []

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


    def program(self, cfg: Any) -> WorkloadProgram:
        """What every CU of a chip shard runs (a system workload has none)."""
        raise TypeError(f"{self.kind} is a system workload: give a [system]")

    def system_program(self, cfg: Any) -> SystemProgram:
        """What every box chip of a system runs (a chip workload has none)."""
        raise TypeError(f"{self.kind} runs on one chip's grid, not on box chips")

    def figures(self, logged: list[Any], clock_hz: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """A chip run's own summary figures and tables from what its CUs logged. None by default."""
        return {}, {}

    def serving_figures(self, logged: list[Any], clock_hz: float,
                        seconds: float) -> tuple[dict[str, Any], dict[str, Any]]:
        """A chip run's serving figures and tables (requests' token times, latency percentiles), taken
        after its result hash: a view of what the hash covers. None by default."""
        return {}, {}

    def input_figures(self, cfg: Any) -> dict[str, Any]:
        """What a chip run measured of its inputs (traces). None by default."""
        return {}

    def system_figures(self, records: list[Any], cfg: Any) -> dict[str, Any]:
        """A system run's own summary figures from its step records. None by default."""
        return {}


WORKLOADS: Registry[type[Workload]] = Registry("workload", packages=("sim.workloads", "sim.system"))


def make_program(params: Workload, cfg: Any) -> WorkloadProgram:
    """The program object every CU of a chip shard runs."""
    return params.program(cfg)

"""Workloads: the programs the chip's compute units run.

A workload registers its parameters class by kind in ``WORKLOADS`` (``workload.kind``).
The class declares its config keys (``SECTION``, the table under [workload] they live in,
and ``KEYS``) and what it can do in one record (``CAPABILITIES``, capabilities.py: where it
runs, whether it maps `rdasim map`'s graph keys itself, prices its steps on a socket's grid,
preempts the requests it serves). It checks the run config it cannot run with (``config_issues``),
builds itself from its table (``from_config``, with cross-checks against the chip), says
how many work items a complete run finishes (``work_items``; ``WORK_UNIT`` names them), and
makes the program every CU of a shard runs (``program``) or every box chip of a system runs
(``system_program``).
A program starts tasks on CUs (``start``) and reacts to the messages they receive
(``on_message``); tasks are generators that yield what they wait for (sim/tasks.py). The
reports ask it for its figures (``figures``, ``serving_figures``, ``input_figures``,
``system_figures``).

A workload class subclasses ``Workload`` to take the defaults written here and in
sim/chip/program.py (``ChipWorkload``: what a chip run asks of it; no checks, no figures, no
program of the other kind); the config and the reports ask only these members, never a
workload's name. This package imports the chip; the chip never imports it. Built in:
kv-decode (kv_decode.py), spec-decode (spec_decode.py), moe (moe.py), race (race.py), dataflow
(dataflow.py); the system workloads are in sim/system. Adding one is a module in this
package (docs/design.md, "Adding a workload").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from sim.chip.program import ChipWorkload, Program
from sim.keys import Issue, Table
from sim.registry import Registry
from sim.tasks import Task as Task  # re-exported: a workload's tasks are sim/tasks.py's
from sim.workloads.capabilities import Capabilities as Capabilities  # re-exported: the record every workload declares

if TYPE_CHECKING:
    from mapping.chips import ChipSpec
    from mapping.placement import MuRoom
    from mapping.systems import System
    from sim.chip.spec import UnitLayout
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


WorkloadProgram = Program  # what every CU of a chip shard runs (declared with the chip: sim/chip/program.py)


class SystemProgram(Protocol):
    """What every box chip of a system runs."""

    def start(self, chip: "BoxChip") -> Task | None:
        """The task a chip starts at cycle 0, if any."""
        ...


class Workload(ChipWorkload, Protocol):
    """A registered workload's parameters (a frozen dataclass whose first field is ``kind``): what a
    chip run asks of it (``ChipWorkload``: its program and figures), and what the config and a
    system of chips ask.

    Members with a body here are defaults a subclass takes; ``CAPABILITIES`` has none: every
    workload declares what it can do."""

    SECTION: ClassVar[str]  # its table under [workload]
    KEYS: ClassVar[Table]
    CAPABILITIES: ClassVar[Capabilities]  # where it runs, whether it maps a graph, ... (capabilities.py)
    # its summary figures on how a chip run was computed, not what it simulated (anchors taken from a
    # cache, simulated ahead and unused): out of the result hash, so a cached or parallel run hashes alike
    UNHASHED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def config_issues(cls, run: dict[str, Any]) -> list[Issue]:
        """What in the resolved ``rdasim run`` config this workload cannot run with, found before
        ``from_config`` (which may map a graph). None by default."""
        return []

    @classmethod
    def from_config(cls, kind: str, section: dict[str, Any], chip: ChipContext, issues: list[Issue]) -> "Workload":
        """Parameters from the resolved [workload.SECTION] table; problems go to ``issues``."""
        ...

    def system_program(self, cfg: Any) -> SystemProgram:
        """What every box chip of a system runs (a chip workload has none)."""
        raise TypeError(f"{self.kind} runs on one chip's grid, not on box chips")

    def system_figures(self, records: list[Any], cfg: Any) -> dict[str, Any]:
        """A system run's own summary figures from its step records. None by default."""
        return {}

    def system_views(self, records: list[Any], logged: list[Any], cfg: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """A system run's figures the result hash does not cover and its own tables' columns, from
        its step records and its shards' views (a serving system's run_requests and run_anchors).
        None by default."""
        return {}, {}


WORKLOADS: Registry[type[Workload]] = Registry("workload", packages=("sim.workloads", "sim.system"))


def make_program(params: ChipWorkload, cfg: Any) -> WorkloadProgram:
    """The program object every CU of a chip shard runs."""
    return params.program(cfg)

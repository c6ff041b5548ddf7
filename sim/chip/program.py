"""What a chip runs, as the chip sees it: the program every CU of a shard runs, and what the
chip's config, shards and report ask of the workload that makes it.

The workloads live in sim/workloads, whose ``Workload`` extends ``ChipWorkload`` with what the
config and a system ask of them. Imports point one way: sim/workloads imports the chip (its
units, messages, references), the chip never imports sim/workloads (tests/test_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from sim.tasks import Task

if TYPE_CHECKING:
    from sim.chip.messages import Message
    from sim.chip.priced_memory import PricedMemory
    from sim.chip.units import ComputeUnit
    from sim.energy.counts import ActionCounts


class Program(Protocol):
    """What every CU of a chip shard runs."""

    def start(self, cu: "ComputeUnit") -> Task | None:
        """The task a CU starts at cycle 0, if any."""
        ...

    def on_message(self, cu: "ComputeUnit", msg: "Message") -> Task | None:
        """The task a message that is not a reply starts on its CU, if any."""
        ...


class ChipWorkload(Protocol):
    """A workload's parameters, as a chip run asks them: its program and its figures. Members with
    a body are defaults a subclass takes."""

    @property
    def kind(self) -> str: ...

    WORK_UNIT: ClassVar[str] = "work items"  # what its work items are called in messages ("sequences", "steps")
    # the result tables its figures add to a run's own (names of cluster/results/schemas.py's tables,
    # whose columns its figures give under the name without its prefix: run_requests, "requests")
    TABLES: ClassVar[tuple[str, ...]] = ()

    @property
    def work_items(self) -> int:
        """Work items (requests, steps, trials) a complete run finishes."""
        ...

    @property
    def token_unit(self) -> str:
        """What the run's ``tokens`` count, and so its per-token rates (``tokens_per_second``,
        ``energy_per_token_joules``): "generated tokens", "routed tokens", "trials", ..."""
        ...

    def program(self, cfg: Any) -> Program:
        """What every CU of a chip shard runs (a system workload has none)."""
        raise TypeError(f"{self.kind} is a system workload: give a [system]")

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

    def priced_actions(self, logged: list[Any]) -> "ActionCounts | None":
        """Actions a chip run priced rather than simulated (a serve run's steps: their memory bytes
        and FLOPs), added to its simulated ones for its energy. None by default."""
        return None

    def priced_memory(self, logged: list[Any]) -> "PricedMemory | None":
        """On-chip memory and tier traffic a chip run priced rather than simulated (a serve run's
        steps, from their anchors' plans: sim/chip/priced_memory.py). None by default."""
        return None

"""What a workload kind can do, declared once on its parameters class (``CAPABILITIES``): the
config and the reports read this record, never a workload's name."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    """A workload kind's capabilities; ``system`` and ``maps_graph`` have no default: every kind
    says where it runs and whether it maps a graph."""

    system: bool
    """Runs on a system of box chips: the config needs a [system] with chips > 0 and builds a
    SystemConfig (``system_program``); else it runs on one chip's CU/MU grid (``program``)."""

    maps_graph: bool
    """Maps `rdasim map`'s graph keys itself: its [workload] table takes them, the config checks
    the chosen generator's required keys before ``from_config``, and a grid-fidelity system's
    chips may run it (a chip workload that maps its plan over the system)."""

    socket: bool = False
    """A system workload that simulates a socket's grid (the [chip], [noc], [memory]) to price its
    steps: the config builds that ChipConfig and hands its chip to ``from_config``."""

    preempts: bool = False
    """Serves requests it can preempt: only then may the config set memory.on_oom = "preempt" or
    memory.admit_watermark."""

    def __post_init__(self) -> None:
        if self.socket and not self.system:
            raise ValueError("socket: only a system workload prices its steps on a socket's grid")

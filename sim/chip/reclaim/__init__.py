"""Reclamation protocols: how the holders of a shared buffer's references and its MU agree
that the buffer can be freed.

A protocol has a holder side (``share`` copies of a reference to other units, ``drop`` one)
and an MU side (``mu_handlers``: what the MU does with the protocol's messages, e.g. +1,
-1, weight returns). Protocols register by name in ``RECLAMATIONS`` (``memory.reclaim``);
each is a frozen params dataclass with its config keys in ``KEYS`` (flat under [memory]).
Built in: ``refcount`` and ``refcount-gated`` (counting.py), ``partial-free`` (weighted
reference counting, weighted.py). Adding one is a module in this package
(docs/design.md, "Adding a reclamation protocol").

Every copy and drop is also logged to the shadow oracle (sim/memory/oracle.py), the truth
the protocol's counts are meant to follow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Generator, Protocol

from sim.keys import Field, Issue
from sim.registry import Registry

if TYPE_CHECKING:
    from sim.chip.memory_unit import MemoryUnit
    from sim.chip.messages import Message
    from sim.chip.references import Ref
    from sim.chip.units import ComputeUnit

Handler = Callable[["MemoryUnit", "Message"], None]


class Reclamation(Protocol):
    """A registered protocol's parameters and behaviour (a frozen dataclass; ``name`` first)."""

    @property
    def name(self) -> str: ...

    KEYS: ClassVar[dict[str, Field]]

    @classmethod
    def from_config(cls, name: str, memory: dict[str, Any]) -> "Reclamation": ...

    def problems(self) -> list[Issue]:
        """What makes these parameters unusable (key paths under memory.)."""
        ...

    @property
    def ref_weight_bits(self) -> int:
        """Bits of weight a reference carries in a message (0 for counting protocols)."""
        ...

    def first_weight(self) -> tuple[int, int]:
        """(total weight, message field) the MU hands out with a new buffer's first reference."""
        ...

    def weight_of(self, value: int) -> int:
        """A reference's weight from the field a message carries."""
        ...

    def mu_handlers(self) -> dict[int, Handler]:
        """Message kind -> what the MU does with it."""
        ...

    def share(self, cu: "ComputeUnit", refs: list["Ref"], receivers: list[list[int]],
              tags: list[list[int]] | None) -> Generator[Any, Any, None]:
        """Task helper: give ``refs[i]`` to every unit in ``receivers[i]``."""
        ...

    def drop(self, cu: "ComputeUnit", ref: "Ref") -> None: ...


RECLAMATIONS: Registry[type[Reclamation]] = Registry("reclamation protocol", packages=("sim.chip.reclaim",))


def reclamation(name: str, **values: Any) -> Reclamation:
    """Protocol ``name`` with its defaults and ``values`` (the config's keys) over them."""
    return RECLAMATIONS.get(name).from_config(name, values)

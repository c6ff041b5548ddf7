"""static-single: one statically sized buffer per MU, as SARA and Revet size their scratchpads
(the MU whole, unless ``static_buffer_bytes`` names a smaller slot)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim.keys import Field
from sim.memory.policies import POLICIES
from sim.memory.policies.contiguous import BUFFER_BYTES, StaticSlots


@POLICIES.register("static-single")
@dataclass(frozen=True)
class StaticSingleParams(StaticSlots):
    name: str = "static-single"

    KEYS: ClassVar[dict[str, Field]] = {"static_buffer_bytes": BUFFER_BYTES}
    MAX_BUFFERS: ClassVar[int | None] = 1

"""static-multi: fixed-size buffers, first fit from the MU's free list (allocators' tt-metal-style
list): ``buffers_per_mu`` slots of an equal share of the MU, unless ``static_buffer_bytes`` sizes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sim.keys import Field
from sim.memory.policies import POLICIES
from sim.memory.policies.contiguous import BUFFER_BYTES, StaticSlots


@POLICIES.register("static-multi")
@dataclass(frozen=True)
class StaticMultiParams(StaticSlots):
    name: str = "static-multi"
    buffers_per_mu: int = 4  # when static_buffer_bytes is 0

    KEYS: ClassVar[dict[str, Field]] = {
        "static_buffer_bytes": BUFFER_BYTES,
        "buffers_per_mu": Field("int", 4, "static-multi: buffers per MU when static_buffer_bytes is 0", min=1),
    }

    @property
    def shares(self) -> int:
        return self.buffers_per_mu

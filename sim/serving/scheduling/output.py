"""What a serving scheduler answers for each step: which requests ran and with how many tokens,
the KV it granted them, and who was preempted or ended (vLLM v1 keeps the same in
``SchedulerOutput``; here one typed record a step)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class SchedulerOutput:
    """One step, as its scheduler planned and settled it.

    ``decode``: the requests that made a decode step (each appends ``decode_tokens`` tokens to its
    KV: more than one when a step verifies drafts); ``prefill``: request -> prompt tokens it
    computed (a chunk of its prefill, or all of it; a scheduler that prefills on admission, beside
    its steps, lists those it started since the previous step); ``made``: tokens the step
    generated; ``kv_granted``: request -> KV pages granted while it was planned (its tail's
    growth, its prefix blocks, its swap-in; none where workers take their own KV); ``preempted``
    and ``ended`` (request -> its RequestLog status: served, or failed): since the previous step's
    record, in order."""

    step: int
    start: int  # cycle
    end: int  # cycle
    decode: tuple[int, ...]
    prefill: dict[int, int] = field(default_factory=dict)
    decode_tokens: int = 1
    made: int = 0
    kv_granted: dict[int, int] = field(default_factory=dict)
    preempted: tuple[int, ...] = ()
    ended: dict[int, str] = field(default_factory=dict)

    HASHED: ClassVar[bool] = False  # a view of the run (kept when it is traced), not part of its result

    @property
    def scheduled(self) -> dict[int, int]:
        """Tokens the step computed for each request (decode and prefill)."""
        out = {r: self.decode_tokens for r in self.decode}
        for r, n in self.prefill.items():
            out[r] = out.get(r, 0) + n
        return out

    @property
    def tokens(self) -> int:
        """Tokens the step computed in all."""
        return sum(self.scheduled.values())

    def row(self) -> tuple[int, int, int]:
        """Its sort key among a run's records."""
        return (self.step, self.start, self.end)

"""How much KV memory a request reserves when it is admitted, and what a run's steps held.

``workload.decode.kv_reservation`` (the serve workload's key), as the vLLM paper's baselines
(Kwon et al., SOSP 2023, section 6.1, "Baseline 2: Orca") reserve a request's KV before paging:

- ``paged``: nothing ahead; the request's blocks are taken as its KV grows (vLLM);
- ``max``: the model's maximum sequence length (``max_model_len``; Orca (Max): 2,048 tokens, the
  OPT models' maximum, in the paper's experiments); a longer request is refused;
- ``pow2``: the prompt and its output length rounded up to a power of two (Orca (Pow2): at most
  2x the output, e.g. 32 slots for an output of 25 tokens);
- ``exact``: the prompt and the exact output length (Orca (Oracle): the output's length known
  ahead, an upper bound no real server reaches).

A reserving request is admitted only when its whole reservation fits the memory left for KV,
and takes it at once; it never grows nor is preempted. Reserved bytes it never writes are the
internal fragmentation (and the reservation) the paper's Figure 2 measures. ``BatchLog``
records, a step at a time, the sequences the step computed and the KV bytes reserved and
written (a view: not part of the result hash, the steps it describes are).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import ClassVar

from sim.chip.records import column

RESERVATIONS = ("paged", "max", "pow2", "exact")
MAX_MODEL_LEN = 2048  # Orca (Max)'s reservation in the vLLM paper (section 6.1): the OPT models' maximum length


def reserved_tokens(kind: str, prompt: int, output: int, max_len: int) -> int:
    """Tokens of KV a request of ``prompt`` and ``output`` tokens reserves when admitted (0: none
    ahead, paged; its blocks are taken as it grows)."""
    if kind == "paged":
        return 0
    if kind == "max":
        return max_len
    if kind == "pow2":
        return prompt + (1 << max(0, output - 1).bit_length())  # the output rounded up to a power of two
    if kind == "exact":
        return prompt + output
    raise ValueError(f"kv_reservation {kind!r}: not one of {', '.join(RESERVATIONS)}")


def refused(kind: str, prompt: int, output: int, max_len: int) -> bool:
    """Whether a server reserving ``kind`` refuses the request outright: under ``max`` one longer
    than the model's maximum length, which its reservation cannot hold."""
    return kind == "max" and prompt + output > max_len


@dataclass(frozen=True, slots=True)
class BatchLog:
    """One step's batch and KV memory (a view of the step; not hashed)."""

    step: int = column("int64", "step number")
    start: int = column("int64", "cycle it started")
    end: int = column("int64", "cycle it ended")
    batch: int = column("int64", "sequences it computed (decode and prefill): vLLM's batched requests")
    reserved_bytes: int = column("int64", "KV bytes the running sequences' pages held (reserved)")
    used_bytes: int = column("int64", "KV bytes those sequences had written once the step was done")

    HASHED: ClassVar[bool] = False

    def row(self) -> tuple:
        return astuple(self)


def batch_figures(logged: list) -> dict:
    """The summary's batch and KV figures of a serve run's steps (none without steps): the largest
    batch and its mean weighted by the steps' cycles, the KV bytes reserved and written at their
    peaks, and the share of the reserved byte-cycles holding written KV (1 - the internal
    fragmentation and reservation of vLLM's Figure 2)."""
    steps = [x for x in logged if isinstance(x, BatchLog)]
    if not steps:
        return {}
    span = sum(s.end - s.start for s in steps)
    reserved = sum((s.end - s.start) * s.reserved_bytes for s in steps)
    used = sum((s.end - s.start) * s.used_bytes for s in steps)
    return {"batch_max": max(s.batch for s in steps),
            "batch_mean": sum((s.end - s.start) * s.batch for s in steps) / span if span else 0.0,
            "kv_reserved_peak_bytes": max(s.reserved_bytes for s in steps),
            "kv_used_peak_bytes": max(s.used_bytes for s in steps),
            "kv_used_share": used / reserved if reserved else None}

"""The evaluation's studies, one module each; ``STUDIES`` in the order the report prints them."""

from __future__ import annotations

from cluster.evaluate.studies import (
    buffers,
    dse,
    kv_on_chip,
    moe_tiling,
    pressure,
    reclamation,
    reservation,
    serving,
    spec_decode,
    switch,
    weights,
)
from cluster.evaluate.study import Study

STUDIES: dict[str, Study] = {s.name: s for s in (
    serving.STUDY, reservation.STUDY, kv_on_chip.STUDY, moe_tiling.STUDY, pressure.STUDY, buffers.STUDY,
    reclamation.STUDY, weights.STUDY, spec_decode.STUDY, switch.STUDY, dse.STUDY)}

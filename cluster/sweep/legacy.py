"""The identities rdasim gave before points were identified by what they ask for (points.py), by which
sweeps stored then are recognised (known.py).

Before, a point's id was the hash of its whole resolved config (every default, each file by its
path: ``config_hash``) and a spec version's hash named its base's files by their paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cluster.config import config_hash
from cluster.sweep.spec import EXECUTION_KEYS, SweepSpec

if TYPE_CHECKING:
    from cluster.sweep.points import Point


def point_id(point: Point) -> str:
    """The id the earlier rule gave ``point``: the hash of its whole resolved config, as planned."""
    return config_hash(point.config)


def spec_hash(spec: SweepSpec) -> str:
    """The hash the earlier rule gave a spec version: the spec as written (its base by content) and its
    resolved base, its files by path; how it runs left out."""
    raw = {k: v for k, v in spec.raw.items() if k != "base"}
    raw["sweep"] = {k: v for k, v in (raw.get("sweep") or {}).items() if k not in EXECUTION_KEYS}
    return config_hash({"spec": raw, "base": spec.base})

"""Sweeps stored under the identities used before points were identified by what they ask for.

Before, a point's id was the hash of its whole resolved config (every default, each file by its
path: ``config_hash``) and a spec version's hash named its base's files by their paths. A sweep
directory written so is continued with nothing recomputed wherever that rule, applied with the
current schema, gives the ids it stores: such a point keeps the id it is stored (or listed) under,
so its files, the manifest and the rows a reader looks up agree, and the spec version keeps the
hash the directory knows it by. Points stored at a commit whose schema had other keys, or from
another path, cannot be told apart from new ones this way: they run again, under the new ids.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cluster.config import config_hash
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.manifest import Manifest
from cluster.sweep.spec import EXECUTION_KEYS, SweepSpec

if TYPE_CHECKING:
    from cluster.sweep.plan import SweepPlan
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


def as_stored(plan: SweepPlan, ids: Collection[str], specs: Collection[str]) -> SweepPlan:
    """``plan`` as a directory that stores (or lists) the point ids ``ids`` and the spec versions ``specs``
    knows it: each point known there by its earlier id only, and not its own, keeps that id; the spec
    version keeps its earlier hash when the directory knows only that one."""
    points: list[Point] = []
    for p in plan.points:
        if ids and p.id not in ids:  # (an empty directory: no earlier id to work out)
            earlier = point_id(p)
            if earlier in ids:
                p = replace(p, id=earlier)
        points.append(p)
    known_before = plan.legacy_spec_hash and plan.legacy_spec_hash in specs and plan.spec_hash not in specs
    return replace(plan, points=points, spec_hash=plan.legacy_spec_hash if known_before else plan.spec_hash)


def stored_plan(plan: SweepPlan, out: str | Path) -> SweepPlan:
    """``plan`` as the sweep in directory ``out`` knows it, from its manifest (the plan as it is without
    one): what a reader of the stored rows looks its points up by."""
    layout = DatasetLayout(Path(out), plan.spec.name, plan.spec.partition_by, plan.command.result)
    if not layout.manifest.is_file():
        return plan
    manifest = Manifest.load(layout.manifest)
    return as_stored(plan, manifest.points, manifest.spec_hashes())

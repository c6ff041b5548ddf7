"""A plan as a sweep directory knows it: points stored under ids given by an earlier rule keep them.

A sweep stored before points were identified by what they ask for (legacy.py) is continued with
nothing recomputed where its points can be recognised: by the earlier rule applied with the current
schema (a directory the code before this rule wrote), or, when that fails (a schema with other keys
then, or another clone's paths), by the manifest's record of each point: its spec version's stored
base with its values, resolved with the current schema and identified by what they ask for, when
that version asks for what the plan's does (its files, read where they were then, by content). A
point so recognised keeps the id it is stored under, so its files, the manifest and the rows a
reader looks up agree; the spec version keeps its stored hash. A trace changed under the same name
since is not noticed in such a directory (the earlier rule named files by path): its points stay.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from cluster.config.identity import ConfigIdentity
from cluster.config.loader import apply_overrides
from cluster.config.schema import validate
from cluster.sweep import legacy
from cluster.sweep.layout import DatasetLayout
from cluster.sweep.manifest import Manifest
from cluster.sweep.plan import SweepPlan, spec_hash
from cluster.sweep.points import Point
from cluster.sweep.spec import SweepSpec, parse_spec


@dataclass(frozen=True)
class Stored:
    """What a sweep directory holds: the point ids its files store (or its manifest lists), the spec
    versions it knows, and its manifest (None: lost)."""

    ids: Collection[str]
    specs: Collection[str]
    manifest: Manifest | None = None


@dataclass(frozen=True)
class Recorded:
    """Stored points recognised from the manifest's record of them: id by the current rule -> stored id."""

    ids: dict[str, str] = field(default_factory=dict)
    spec_hash: str = ""  # the stored hash of the spec version that asks for what the plan's does


def as_stored(plan: SweepPlan, stored: Stored) -> SweepPlan:
    """``plan`` with each point stored (or listed) under an earlier id, and not its own, known by that id,
    and its spec version by the hash the directory knows it by."""
    if not stored.ids:  # an empty directory: nothing to recognise
        return plan
    earlier = {p.id: legacy.point_id(p) for p in plan.points if p.id not in stored.ids}
    missing = any(old not in stored.ids for old in earlier.values())
    by_rule = {plan.spec_hash, plan.legacy_spec_hash} & set(stored.specs)
    found = Recorded()
    known = {*earlier.values(), *(p.id for p in plan.points)}
    if stored.manifest is not None:  # not known by a rule: from the record, whose spec versions are re-planned
        unknown = missing and any(pid not in known for pid in stored.manifest.points)  # only if it holds such points
        if unknown or not by_rule:
            found = recorded(plan, stored.manifest, known)
    points: list[Point] = []
    for p in plan.points:
        if p.id in earlier:
            stored_as = earlier[p.id] if earlier[p.id] in stored.ids else found.ids.get(p.id)
            p = replace(p, id=stored_as) if stored_as else p
        points.append(p)
    spec = plan.spec_hash
    if spec not in stored.specs:
        spec = plan.legacy_spec_hash if plan.legacy_spec_hash in stored.specs else found.spec_hash or spec
    return replace(plan, points=points, spec_hash=spec)


def _version(entry: Mapping) -> SweepSpec | None:
    """A stored spec version as it was planned: its text read from where it was, its base as stored."""
    text, source, base = entry.get("text"), entry.get("source") or "", entry.get("base")
    if not text or not isinstance(base, dict):
        return None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    raw.pop("base", None)  # as resolved then, not as the file reads now
    spec, issues = parse_spec(raw, Path(source).parent, source)
    return None if issues else replace(spec, base=base)


def _same_versions(plan: SweepPlan, manifest: Manifest, identity: ConfigIdentity) -> dict[str, SweepSpec]:
    """The stored spec versions (hash -> spec as planned then) that ask for what ``plan``'s does: by either
    rule's hash, else by their text and base read again and hashed by the current rule."""
    out: dict[str, SweepSpec] = {}
    for entry in manifest.specs:
        spec = _version(entry)
        if spec is None or spec.command != plan.spec.command:
            continue
        if entry["hash"] in (plan.spec_hash, plan.legacy_spec_hash) or spec_hash(spec, identity) == plan.spec_hash:
            out[entry["hash"]] = spec
    return out


def recorded(plan: SweepPlan, manifest: Manifest, known: Collection[str]) -> Recorded:
    """The stored points not ``known`` by rule whose record (their spec version's base and their values)
    asks for what a point of ``plan`` does, in a spec version that asks for what ``plan``'s does."""
    identity = ConfigIdentity(plan.command.schema())
    versions = _same_versions(plan, manifest, identity)
    unknown = [pid for pid in manifest.points if pid not in known] if versions else []
    out: dict[str, str] = {}
    for pid in unknown:
        entry = manifest.points[pid]
        version = next((versions[h] for h in entry.specs if h in versions), None)
        if version is None:
            continue
        cfg, issues = validate(apply_overrides(version.base, list(entry.values.items())), identity.schema)
        if not issues:
            out.setdefault(identity.point_id(cfg), pid)
    return Recorded(out, next(reversed(versions), ""))


def stored_plan(plan: SweepPlan, out: str | Path) -> SweepPlan:
    """``plan`` as the sweep in directory ``out`` knows it, from its manifest (the plan as it is without
    one): what a reader of the stored rows looks its points up by."""
    layout = DatasetLayout(Path(out), plan.spec.name, plan.spec.partition_by, plan.command.result)
    if not layout.manifest.is_file():
        return plan
    manifest = Manifest.load(layout.manifest)
    return as_stored(plan, Stored(manifest.points.keys(), manifest.spec_hashes(), manifest))

"""A study as its directory knows it: a spec stored under the hash an earlier rule gave it keeps that hash.

A study's spec hash names what it asks for (spec.py ``explore_hash``). A directory written before
then is recognised by the earlier rule applied now (``legacy_hash``: the same base files at the
same paths), or, when that fails (another clone's paths), by the manifest's record of each spec
version: its text and its base as stored, hashed by the current rule (the files read where they
were then, by content). A version so recognised keeps its stored hash, so the rows stored under it
and the manifest agree; its base run's row (reference.py) is known by the earlier rule applied to the
version's stored base, so it is reused where the config keys are as they were.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping

from cluster.config import config_hash
from cluster.config.identity import ConfigIdentity
from cluster.config.schema import validate
from cluster.explore.spec import ExploreSpec, explore_hash
from cluster.sweep.manifest import Manifest


def stored_hash(spec: ExploreSpec, manifest: Manifest) -> str | None:
    """The hash ``manifest`` knows ``spec``'s question by (None: it holds another question)."""
    known = manifest.spec_hashes()
    for rule in (spec.spec_hash, spec.sweep.legacy_spec_hash):
        if rule in known:
            return rule
    identity = ConfigIdentity(spec.command.schema())
    for entry in reversed(manifest.specs):
        if _asked_for(entry, identity) == spec.spec_hash:
            return str(entry["hash"])
    return None


def _asked_for(entry: Mapping, identity: ConfigIdentity) -> str | None:
    """A stored spec version's hash by the current rule: its [explore] as written, its base as resolved then."""
    text, base = entry.get("text"), entry.get("base")
    if not text or not isinstance(base, dict):
        return None
    try:
        explore = tomllib.loads(text).get("explore")
    except tomllib.TOMLDecodeError:
        return None
    return explore_hash(explore, base, identity) if isinstance(explore, dict) else None


def earlier_base_id(spec: ExploreSpec, manifest: Manifest | None) -> str | None:
    """The id the earlier rule gave the base run of the spec version ``spec`` is stored as (the hash of its
    stored base resolved whole, files by the paths they had then): a base run stored before rows carried their
    own id, in another clone, is known by it (None: no such version, or its base is not a valid config)."""
    entry = next((e for e in manifest.specs if e.get("hash") == spec.spec_hash), None) if manifest else None
    if entry is None or not isinstance(entry.get("base"), dict):
        return None
    cfg, issues = validate(entry["base"], spec.command.schema())
    return None if issues else config_hash(cfg)

"""What a resolved config asks for, and its hash: the identity of a sweep point.

A config's identity leaves out every key at its schema default, so a commit that adds a key
whose default keeps the old behaviour leaves every identity as it was, and names each file a
file key (``Field(file=True)``) gives by the sha256 of its bytes, not by its path: the same
trace in another clone is the same point, and a trace changed under the same name is not.
A path that names no regular file (a directory, a file not written yet) stays as its path.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from cluster.config import units
from cluster.config.loader import config_hash
from cluster.config.schema import Field, Issue, OpenTable, Table, TableList, check_field, get_path

DIGEST_PREFIX = "sha256:"  # a file key's identity: this and the hex digest of the file's bytes
CHUNK = 1 << 20
_NO_DEFAULT = object()  # a required key, or a default the schema cannot normalise: never left out


@dataclass
class FileDigests:
    """The sha256 of files' bytes, each file read once while its (size, mtime) stays the same: a sweep
    of 10^4 points over one 700 KB trace reads it once, not 10^4 times."""

    known: dict[tuple[str, int, int], str] = field(default_factory=dict)  # (path, size, mtime_ns) -> hex

    def identity(self, path: str) -> str:
        """``path``'s identity: ``sha256:<hex>`` of its bytes if it is a regular file, else the path itself."""
        try:
            st = os.stat(path)
        except (OSError, ValueError):  # missing, unreadable, a NUL in the name: its point fails when run
            return path
        if not os.path.isfile(path):
            return path
        key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
        digest = self.known.get(key)
        if digest is None:
            sha = hashlib.sha256()
            try:
                with open(path, "rb") as fh:
                    while chunk := fh.read(CHUNK):
                        sha.update(chunk)
            except OSError:
                return path
            digest = self.known[key] = sha.hexdigest()
        return DIGEST_PREFIX + digest


def _same(a: object, b: object) -> bool:
    """Equal and of the same types all the way down (True is not 1, 2.0 is not 2: they hash apart)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@dataclass
class ConfigIdentity:
    """Identities of configs resolved against one ``schema`` (each field's normalised default worked out once)."""

    schema: Table
    digests: FileDigests = field(default_factory=FileDigests)
    _defaults: dict[int, tuple[Field, object]] = field(default_factory=dict)  # id(Field) -> (it, its default)
    _fields: dict[int, tuple[Table, dict]] = field(default_factory=dict)  # id(Table) -> (it, its fields)

    def point_id(self, cfg: dict) -> str:
        """The 16-hex-digit id of what ``cfg`` (validated against the schema) asks for."""
        return config_hash(self.asked_for(cfg))

    def asked_for(self, cfg: dict) -> dict:
        """``cfg`` without the keys at their defaults, each file by its content (module docstring)."""
        return self._table(cfg, self.schema, cfg)

    def _table(self, values: dict, table: Table, root: dict) -> dict:
        out: dict = {}
        fields = self._fields_of(table)
        for key, value in values.items():
            node = fields.get(key)
            if node is None:  # not the schema's (validated configs have none): kept as it is
                out[key] = value
            elif isinstance(node, Table):
                inner = self._table(value, node, root) if isinstance(value, dict) else value
                if inner != {}:
                    out[key] = inner
            elif isinstance(node, TableList):
                if not (isinstance(value, list) and _same(value, list(node.default or []))):
                    out[key] = [self._table(v, node.table, root) if isinstance(v, dict) else v for v in value]
            elif isinstance(node, OpenTable):
                if value != {}:
                    out[key] = {k: self._leaf(node.value, v) for k, v in value.items()} \
                        if node.value is not None and isinstance(value, dict) else value
            elif not _same(value, self._default(node, root)):
                out[key] = self._leaf(node, value)
        return out

    def _fields_of(self, table: Table) -> dict:
        """``table.fields``, worked out once (a table that extends itself merges registries on every read)."""
        entry = self._fields.get(id(table))
        if entry is None or entry[0] is not table:
            entry = self._fields[id(table)] = (table, table.fields)
        return entry[1]

    def _leaf(self, node: Field, value: object) -> object:
        """A leaf's value as identified: a file key's path by its file's content."""
        if node.file and isinstance(value, str) and value:
            return self.digests.identity(value)
        if node.item is not None and isinstance(value, list):  # a list of files (or of anything)
            return [self._leaf(node.item, v) for v in value]
        return value

    def _default(self, node: Field, root: dict) -> object:
        """``node``'s default as ``validate`` resolves it in ``root`` (a time default in cycles of root's clock)."""
        entry = self._defaults.get(id(node))
        if entry is None or entry[0] is not node:  # kept with its node: its id is not reused while cached
            issues: list[Issue] = []
            known = _NO_DEFAULT if node.required else check_field(node, node.default, "", issues, bare=True)
            entry = self._defaults[id(node)] = (node, _NO_DEFAULT if issues else known)
        known = entry[1]
        if isinstance(known, tuple) and known and known[0] == "time":  # validate's cycles placeholder
            clock = get_path(root, node.clock) if node.clock else None
            return units.time_to_cycles(known[1], clock) if clock else _NO_DEFAULT
        return known

    def given(self, raw: dict, table: Table | None = None) -> dict:
        """A raw config (a sweep's base, before validation) with each file it names by its content."""
        fields = self._fields_of(table or self.schema)
        out: dict[str, object] = {}
        for key, value in raw.items():
            node = fields.get(key)
            if isinstance(node, Table) and isinstance(value, dict):
                out[key] = self.given(value, node)
            elif isinstance(node, TableList) and isinstance(value, list):
                out[key] = [self.given(v, node.table) if isinstance(v, dict) else v for v in value]
            else:
                out[key] = self._leaf(node, value) if isinstance(node, Field) else value
        return out

    def set_at(self, path: str, value: object) -> object:
        """``value`` as set at dotted ``path`` (a sweep's axis, a point's key), a file by its content."""
        node: object = self.schema
        for part in path.split("."):
            if not isinstance(node, Table):
                return value
            node = self._fields_of(node).get(part.split("[", 1)[0])
            if isinstance(node, TableList) and part.endswith("]"):
                node = node.table
        return self._leaf(node, value) if isinstance(node, Field) else value

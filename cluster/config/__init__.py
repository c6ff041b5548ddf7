"""Config: TOML with units, validated against declarative schemas."""

from cluster.config.loader import ConfigError, config_hash, load  # noqa: F401
from cluster.config.schema import REQUIRED, Field, Issue, OpenTable, Table, TableList  # noqa: F401

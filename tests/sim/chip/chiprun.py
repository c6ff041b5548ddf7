"""Helpers for chip tests: a config from a few keys, run it, read its figures."""

from __future__ import annotations

import copy

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, chip_config
from cluster.jobs.chip import simulate_chip

SMALL_CHIP = {"preset": "plasticine", "rows": 4, "cols": 8}  # 16 CUs, 16 MUs


def config(raw: dict, **flags):
    """ChipConfig from a raw TOML-like dict (small chip and packet NoC unless given)."""
    raw = copy.deepcopy(raw)
    raw.setdefault("chip", dict(SMALL_CHIP))
    raw.setdefault("noc", {}).setdefault("model", "packet")
    return chip_config(load(RUN_SCHEMA, raw=raw), **flags)


def run(raw: dict, shards: int = 1, cut: str = "rows", backend: str = "local", **flags):
    """One run summarised (cluster/jobs/summarised.py)."""
    return simulate_chip(config(raw, **flags), shards=shards, cut=cut, backend=backend)


def listed(cols: dict) -> dict:
    """A table's columns as lists (an array's masked value, no such time, as None), comparable with ==."""
    return {k: v.tolist() if hasattr(v, "tolist") else list(v) for k, v in cols.items()}


def race(reclaim: str, network: str = "packet", **race_keys) -> dict:
    """The race scenario on plasticine (the example's placement)."""
    raw = {"chip": {"preset": "plasticine"}, "noc": {"model": network, "max_packet_bytes": 8192},
           "memory": {"reclaim": reclaim}, "workload": {"kind": "race", "race": {"trials": 3, **race_keys}}}
    return raw

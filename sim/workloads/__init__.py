"""Workloads: the programs the chip's compute units run (kv-decode, spec-decode, moe, race)."""

from __future__ import annotations

KINDS = ("kv-decode", "spec-decode", "moe", "race")


def make_program(params, cfg):
    """The program object every CU of a chip shard runs, for ``params.kind``."""
    if params.kind in ("kv-decode", "spec-decode"):
        from sim.workloads.kv_decode import KvDecode

        return KvDecode(params, cfg)
    if params.kind == "moe":
        from sim.workloads.moe import Moe

        return Moe(params, cfg)
    if params.kind == "race":
        from sim.workloads.race import Race

        return Race(params, cfg)
    raise ValueError(f"unknown workload kind {params.kind!r}; expected one of {KINDS}")

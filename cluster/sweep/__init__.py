"""Sweeps: a spec expanded into points, run on Ray, stored as a hive-partitioned Parquet dataset.

spec (TOML structure) -> plan (points resolved and checked) -> runner (skip stored points,
execute the rest on Ray, store each as it finishes) -> status (from the stored files).
"""

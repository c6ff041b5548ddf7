"""Small noop sweeps for fault injection: a spec, its run in this process, its files."""

from __future__ import annotations

from pathlib import Path


def noop_spec(tmp_path: Path, values=range(1, 7), name: str = "n", extra: str = "", file: str = "n.toml") -> Path:
    """A spec of ``len(values)`` noop points (each echoes its value)."""
    spec = tmp_path / file
    spec.write_text(f'[sweep]\nname = "{name}"\ncommand = "noop"\n{extra}[axes]\n'
                    f'"noop.value" = [{", ".join(str(v) for v in values)}]\n')
    return spec


def point_files(out: Path, name: str = "n") -> list[Path]:
    return sorted((out / name / "sweep_noop").rglob("*.parquet"))

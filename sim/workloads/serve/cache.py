"""A file of simulated anchors (``workload.decode.step_cache``) that later runs reuse.

An anchor is a pure function of the chip, its NoC, memory policy, reclamation protocol and
out-of-memory behaviour, the run's seed (placement), the model, the anchor's options and shape,
and the code: its key is a hash of all of them (``key``) with the package version and this
file's format, so a run finds only anchors it would simulate the same way. A change to the
simulator that keeps the version needs a fresh file (delete it). The serve run's program reads
the file when its first step needs an anchor; the run's figures (after the run, in the process
that reports it) add the anchors it simulated, written to a temporary file and renamed, so an
interrupted write never leaves half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

FORMAT = 4  # 3: a memory-bound anchor's layer is the mean of its steady layers; 4: multicast, tiled decode


def key(cfg, model, options, shape, depth: tuple[int, ...]) -> str:
    """The hash naming one anchor's simulation (module docstring; ``depth``: the constants it is
    simulated by: the layers and pipeline iterations it simulates, its tiling, its CUs' least share)."""
    from importlib import metadata

    try:
        version = metadata.version("rdasim")
    except metadata.PackageNotFoundError:
        version = "unknown"
    parts = (FORMAT, version, cfg.spec, cfg.noc, cfg.network, cfg.sizing, cfg.mu, cfg.policy, cfg.reclaim, cfg.on_oom,
             cfg.seed, model, options.tiles, options.stream_bytes, options.map_seconds, shape, depth)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def entry(run) -> dict:
    """What the file keeps of an anchor's simulation (an anchors.StepPlanRun; not its ``ends``)."""
    a = run.shape
    return {"shape": [a.tokens, a.keys, a.kv_read], "tiles": run.tiles, "cus": run.cus, "iterations": run.iterations,
            "end": run.end, "per_iteration": run.per_iteration, "roofline_layer": run.roofline_layer,
            "plan_status": run.plan_status, "messages": run.messages}


def run_of(e: dict):
    """The anchors.StepPlanRun an ``entry`` keeps."""
    from sim.workloads.serve.anchors import StepPlanRun
    from sim.workloads.serve.shapes import StepShape

    return StepPlanRun(StepShape(*e["shape"]), e["tiles"], e["cus"], e["iterations"], e["end"], e["per_iteration"],
                       e["roofline_layer"], e["plan_status"], e["messages"])


def read(path: str) -> dict[str, dict]:
    """Every anchor a cache file holds, by key (none if there is no file yet)."""
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"step cache {path}: not a cache file ({exc}); delete it") from None
    if data.get("format") != FORMAT:
        return {}
    return dict(data.get("anchors", {}))


def write(path: str, anchors: dict[str, dict]) -> None:
    """Add ``anchors`` to the cache file, atomically (a temporary file renamed over it)."""
    merged = {**read(path), **anchors}
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": FORMAT, "anchors": merged}, sort_keys=True, indent=0))
    os.replace(tmp, p)

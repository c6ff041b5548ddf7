"""The anchor store (``workload.decode.step_cache``): a directory of simulated anchors that a
run's steps, its worker processes, a sweep's points and its nodes share.

An anchor (anchors.py) is a pure function of the chip and the run's memory and NoC, the model,
the anchor's options and shape, and the code. Its key (``key``) is a hash of exactly those:
every ChipConfig field but those listed in ``UNKEYED`` (each with why it cannot change an
anchor's cycles; tests/sim/workloads/serve/test_cache.py changes every keyed input and sees a
new key, and simulates an anchor under each unkeyed one and sees the same cycles), and ``code``:
a hash of the simulator's source files, so an edit to the simulator under the same package
version never hands out a stale anchor.

``memory.on_oom`` (and ``preempt_mode``) are consulted only when an MU runs out of memory; an
anchor whose run never does is the same under each, and is stored under the key without them.
One whose run did is stored under the key with them (``key(..., oom=...)``), its plain key
holding a marker that sends a reader on; a sweep over on_oom shares every anchor that fits.

One file an anchor, ``<dir>/<key>.json``, written to a temporary file and renamed: a reader
sees a whole entry or none, and processes adding anchors never drop each other's. ``once``
simulates an anchor only after taking its key's lock (an exclusive ``flock`` on
``<dir>/<key>.lock``, let go when the process ends, killed or not), looking again once it has
it: of two processes needing one anchor, one simulates it and the other waits and reads it;
a sweep killed and resumed simulates again only the anchors whose files were not yet written.
The lock holds across the processes of one machine, and across machines where the results
tree's file system honours ``flock`` (NFS v4, Lustre and CephFS do; elsewhere two nodes may
each simulate an anchor once, and the second rename leaves the same entry).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

FORMAT = 6  # 4: multicast, tiled decode; 5: one file an anchor, the code's hash in the key, on_oom out of it;
# 6: its MUs' bytes and tier traffic (an entry of 5 lacks them: read as absent, simulated again)
ROOT = Path(__file__).resolve().parents[3]
CODE = ("sim", "mapping", "allocators")  # the packages an anchor's simulation runs (its mapping, placement, chip)

# ChipConfig fields that cannot change an anchor's cycles, and why (the key holds every other one)
UNKEYED = {
    "workload": "the anchor's own dataflow workload is built from the model, options and shape, all keyed",
    "on_oom": "consulted only when an MU runs out of memory: an anchor that did is keyed with it (module docstring)",
    "preempt_mode": "read only under on_oom = preempt, after an MU ran out of memory (as on_oom)",
    "admit_watermark": "admission of decode sequences; an anchor runs no sequences",
    "prefix_sharing": "decode sequences' shared prefix blocks; an anchor runs no sequences",
    "prefix_cache_bytes": "decode sequences' prefix cache; an anchor runs no sequences",
    "max_cycles": "only whether the run ends in time: an anchor that does not is an error, never stored",
    "sample_cycles": "the per-MU time series' period: what is recorded, not what happens",
    "trace": "an anchor's run records no trace",
    "trace_limit": "an anchor's run records no trace",
    "memory_map_cycle": "an anchor's run takes no memory map",
    "energy": "energies are counted from the run's actions, which they do not change",
}
OOM_FIELDS = ("on_oom", "preempt_mode")


def sources_hash(root: Path, packages: tuple[str, ...] = CODE) -> str:
    """A hash of every .py file of ``packages`` under ``root``, by path and bytes."""
    h = hashlib.sha256()
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@lru_cache(maxsize=None)
def code() -> str:
    """The simulator's source hash (``sources_hash`` of this tree), once a process."""
    return sources_hash(ROOT)


def key(cfg, model, options, shape, depth: tuple[int, ...], oom: bool = False) -> str:
    """The hash naming one anchor's simulation (module docstring; ``depth``: the constants it is
    simulated by; ``oom``: the key of an anchor whose run ran out of memory, with on_oom)."""
    chip = tuple((f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg)
                 if f.name not in UNKEYED or (oom and f.name in OOM_FIELDS))
    parts = (FORMAT, code(), chip, model, options.tiles, options.stream_bytes, options.map_seconds, shape, depth)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def entry(run) -> dict:
    """What the store keeps of an anchor's simulation (an anchors.StepPlanRun; not its ``ends``)."""
    a = run.shape
    return {"shape": [a.tokens, a.keys, a.kv_read], "tiles": run.tiles, "cus": run.cus, "iterations": run.iterations,
            "end": run.end, "per_iteration": run.per_iteration, "roofline_layer": run.roofline_layer,
            "plan_status": run.plan_status, "messages": run.messages, "oom_events": run.oom_events,
            "memory": dataclasses.asdict(run.memory)}


def run_of(e: dict):
    """The anchors.StepPlanRun an ``entry`` keeps."""
    from sim.workloads.serve.anchors import PlanMemory, StepPlanRun
    from sim.workloads.serve.shapes import StepShape

    return StepPlanRun(StepShape(*e["shape"]), e["tiles"], e["cus"], e["iterations"], e["end"], e["per_iteration"],
                       e["roofline_layer"], e["plan_status"], e["messages"], oom_events=e["oom_events"],
                       memory=PlanMemory(**e["memory"]))


def _path(root: str, k: str) -> Path:
    return Path(root) / f"{k}.json"


def _read(root: str, k: str) -> dict | None:
    p = _path(root, k)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"step cache {p}: not an anchor file ({exc}); delete it") from None
    return data if data.get("format") == FORMAT else None


def _write(root: str, k: str, e: dict) -> None:
    p = _path(root, k)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": FORMAT, **e}, sort_keys=True))
    os.replace(tmp, p)


def find(root: str, plain: str, with_oom: str) -> dict | None:
    """The stored entry of an anchor (``plain``: its key; ``with_oom``: its key with the run's on_oom),
    or None."""
    if Path(root).is_file():
        raise ValueError(f"step cache {root}: a file, not a directory (a step cache is one file an anchor "
                         f"since format {FORMAT}); delete it or name a directory")
    e = _read(root, plain)
    if e is not None and e.get("oom"):
        return _read(root, with_oom)
    return e


@contextmanager
def _locked(root: str, k: str) -> Iterator[None]:
    fd = os.open(Path(root) / f"{k}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # lets go of the lock


def once(root: str, plain: str, with_oom: str, simulate: Callable[[], Any]):
    """(the anchor's StepPlanRun, True if read from the store): read, or simulated by this process
    under the key's lock and stored (module docstring)."""
    hit = find(root, plain, with_oom)
    Path(root).mkdir(parents=True, exist_ok=True)
    if hit is None:
        with _locked(root, plain):
            hit = find(root, plain, with_oom)  # another process may have stored it while this one waited
            if hit is None:
                run = simulate()
                e = entry(run)
                if run.oom_events:  # its cycles may depend on on_oom: kept under the key with it
                    _write(root, with_oom, e)
                    if _read(root, plain) is None:
                        _write(root, plain, {"oom": True})
                else:
                    _write(root, plain, e)
                return run, False
    return run_of(hit), True


def stored(root: str) -> int:
    """Anchors a store holds (its entries, markers left out)."""
    p = Path(root)
    return sum(1 for f in p.glob("*.json") if not (json.loads(f.read_text()).get("oom"))) if p.is_dir() else 0

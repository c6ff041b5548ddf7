"""A point's predicted cost before it runs, for the ETA (cluster/progress.py ``WorkEta``): seconds on one core.

What is known from a config alone: a NoC point simulates rows x cols routers for its warm-up
and measurement cycles (and drains them), and its per-cycle work grows with the offered load
(flits in flight); a noop point sleeps. A chip or system run stops when its work is done, which
its config says only as the work items it names (requests, steps, trials): its prior is their
number. A serve run's time is its anchors' (sim/workloads/serve/progress.py): its prior is
the predicted seconds of the anchors the Llama-3.1-8B example asks for (docs/run.md: 4 decode
batches, prefills of 256, 1,024 twice and 4,096 tokens) on its chip, simulated one at a time
(a sweep point's Ray task has one core). Each is in seconds: a unit of each times its seconds
on one core of the machine the example sweeps were recorded on (tests/data/eta/point_seconds.json:
the median of a point's seconds over its units), so a sweep's ETA has a basis from the start;
what a policy or a protocol makes them cost is learned from the points that finish (``WorkEta``
fits a scale and one effect per swept value). The features are the point's swept values: the
learned effects attach to them.
"""

from __future__ import annotations

from collections.abc import Iterable

WORK_ITEMS = ("requests", "steps", "trials")  # what a workload's config counts its work in (0: all of a trace)
# seconds on one core (module docstring): a router-cycle of a NoC point (sweep_noc.toml, 1.25e-6), a work
# item of a kv-decode run (sweep_policies.toml, 0.71) and of a moe run (sweep_run.toml, 0.30), any other
# kind's between them
ROUTER_CYCLE_SECONDS = 1.25e-6
ITEM_SECONDS = {"kv-decode": 0.71, "moe": 0.30}
OTHER_ITEM_SECONDS = 0.5
START_UP_SECONDS = 10.0  # a fresh worker's imports and kernel compiles before its first point (5-14 s recorded)
SERVE_KINDS = ("serve", "serve-system")
# a request of a serve run priced at the roofline (step_roofline: no anchor simulated): the reservation study's
# 400 requests took 2.3-4.9 s on one core (cluster/evaluate/studies/reservation.py)
ROOFLINE_REQUEST_SECONDS = 0.01


def prior(command: str, config: dict) -> float:
    """The predicted seconds on one core of a point of ``command`` with this resolved ``config``."""
    if command == "noc":
        noc = config.get("noc") or {}
        rows = noc.get("rows") or noc.get("k") or 8
        cols = noc.get("cols") or noc.get("k") or 8
        cycles = (noc.get("warmup_cycles") or 0) + (noc.get("measure_cycles") or 0) or 1
        return ROUTER_CYCLE_SECONDS * rows * cols * cycles * (1.0 + 2.0 * float(noc.get("rate") or 0.0))
    if command == "noop":
        return 0.01 + float((config.get("noop") or {}).get("sleep") or 0.0)
    workload = config.get("workload") or {}
    if workload.get("kind") in SERVE_KINDS:
        decode = workload.get("decode") or {}
        if decode.get("step_roofline"):
            return ROOFLINE_REQUEST_SECONDS * max(1, int(decode.get("requests") or 1))
        return serve_seconds(config)
    each = ITEM_SECONDS.get(str(workload.get("kind")), OTHER_ITEM_SECONDS)
    for section in workload.values():  # run, system: the work items the workload names
        if isinstance(section, dict):
            items = [v for k, v in section.items() if k in WORK_ITEMS and isinstance(v, int) and v > 0]
            if items:
                return each * items[0]
    return each


def serve_seconds(config: dict) -> float:
    """A serve point's anchors' predicted seconds on one core (module docstring); without a chip or a
    model the config names (it will be refused), one decode anchor's on sn40l."""
    from cluster.config.run import chip_spec
    from mapping.chips import RDA_PRESETS
    from mapping.models import MODELS
    from sim.workloads.serve.progress import anchor_seconds
    from sim.workloads.serve.shapes import StepShape

    chip, decode = config.get("chip") or {}, (config.get("workload") or {}).get("decode") or {}
    model = MODELS.get(decode.get("model") or "llama-3.1-8b") or MODELS["llama-3.1-8b"]
    try:
        spec = chip_spec(chip)[0] if chip.get("preset") else RDA_PRESETS["sn40l"]
    except (KeyError, TypeError, ValueError):
        spec = RDA_PRESETS["sn40l"]
    prefills = [StepShape(t, t * (t + 1) // 2, c) for t, c in ((256, 0), (1024, 0), (1024, 16384), (4096, 0))]
    decodes = [StepShape(b, b * 1024, b * 1024) for b in (1, 4, 16, 64)]
    return sum(anchor_seconds(model, a, spec) for a in prefills + decodes)


def features(values: dict) -> Iterable[tuple]:
    """(path, value) of each swept value, hashable (tables and lists as their text)."""
    return tuple((path, v if isinstance(v, (str, int, float, bool)) or v is None else repr(v))
                 for path, v in sorted(values.items()))

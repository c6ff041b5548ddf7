"""How much memory a simulation will take, estimated before anything is allocated.

An absurd size (``noc.k = 1000``, ``chip.rows = 10000``, ``chip.mu_bytes = "1TiB"``)
would otherwise die minutes later in numpy with "Unable to allocate 3.64 TiB" or take
the machine down with it. The estimate counts the terms that grow fastest, with the
constants measured here (tracemalloc, building one shard; numpy 2, CPython 3.11):

- routing table: every router of a shard holds the output port to every destination, as
  many bytes each as the NoC model says (``route_entry_bytes``: 4 for the cycle-level
  model, 12 for the packet model at its peak while building);
- per router of the cycle-level NoC: ports x VCs x (24 B per flit buffer + ~100 B);
- per tile of a chip (units, queues, NI state): about 40 KB;
- per MU, its memory policy's bookkeeping as the policy says (``footprint``: the virtual
  policy's free list and block table, about 46 B a block; nothing worth counting for the
  contiguous ones);
- per simulated cycle of a NoC run (created/ejected flit counters): 16 B.
- per request of a workload that serves requests (its arrival, lengths and record): about
  350 B (peak RSS of ``examples/kv_decode.toml`` at 1,000 and 200,000 requests);
- per buffer a workload keeps live (``2 x layers x heads`` of each of ``max_batch``
  sequences: its placement and its MU's record): at least 100 B;
- per point of a sweep (its resolved config and overrides): about 3.5 KB (tracemalloc, 20,000
  points of the ``noop`` command, the smallest config).

The NoC model and the memory policy are asked, never named: a new one states its own.

A config whose largest shard needs more than this machine's memory is refused with the
key that drives the estimate; the estimate is an order of magnitude, not a promise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.memory.policies import Footprint

TILE_BYTES = 40_000
ROUTER_STATE_BYTES = 100
FLIT_BUFFER_BYTES = 24
NOC_PORTS = 5
CYCLE_BYTES = 16
REQUEST_BYTES = 350
BUFFER_BYTES = 100
POINT_BYTES = 3_500
GRID = "chip.rows x chip.cols"


@dataclass(frozen=True)
class Term:
    bytes: float
    key: str  # the config key that drives this term
    what: str  # what the bytes hold, in words


@dataclass(frozen=True)
class Estimate:
    terms: tuple[Term, ...]

    @property
    def bytes(self) -> float:
        return sum(t.bytes for t in self.terms)

    @property
    def largest(self) -> Term:
        return max(self.terms, key=lambda t: t.bytes)


def machine_bytes() -> int:
    """Memory this process may use: the machine's physical memory, or less under an address-space limit
    (``ulimit -v``, a job scheduler's cap)."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not reported: assume a large node
        physical = 1 << 40
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, ValueError, OSError):  # not a POSIX system
        return physical
    return physical if limit == resource.RLIM_INFINITY else min(physical, limit)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover


def noc_estimate(rows: int, cols: int, vcs: int, vc_buffers: int, shards: int, cycles: int, grid_key: str) -> Estimate:
    """The largest shard of a cycle-level NoC run (rdasim noc)."""
    n = rows * cols
    local = -(-n // max(shards, 1))
    return Estimate((
        Term(4.0 * local * n, grid_key, f"the routing table of {local:,} routers to {n:,} destinations"),
        Term(local * NOC_PORTS * vcs * (FLIT_BUFFER_BYTES * vc_buffers + ROUTER_STATE_BYTES), grid_key,
             f"the buffers of {local:,} routers"),
        Term(CYCLE_BYTES * cycles, "noc.warmup_cycles + measure_cycles + drain_cycles",
             f"per-cycle counters of {cycles:,} cycles"),
    ))


def chip_estimate(rows: int, cols: int, mus: int, mu: Footprint, route_entry_bytes: int, shards: int) -> Estimate:
    """The largest shard of a chip run (rdasim run): ``mu``, what its memory policy keeps per MU."""
    n = rows * cols
    local = -(-n // max(shards, 1))
    terms = [
        Term(float(route_entry_bytes) * local * n, GRID, f"the routing table of {local:,} tiles to {n:,} destinations"),
        Term(TILE_BYTES * local, GRID, f"the state of {local:,} tiles"),
    ]
    if mu.bytes:
        terms.append(Term(mu.bytes * mus / max(shards, 1), "chip.mu_bytes",
                          f"{mu.what} in each of {-(-mus // max(shards, 1)):,} MUs"))
    return Estimate(tuple(terms))


def problem(est: Estimate, values: dict[str, object], available: int | None = None) -> tuple[str, str] | None:
    """(key, message) if the estimate exceeds this machine's memory, else None; ``values`` shows each key's value."""
    available = machine_bytes() if available is None else available
    if est.bytes <= available:
        return None
    t = est.largest
    return t.key, (f"{values.get(t.key, '')}: this simulation would need about {human(est.bytes)} of memory per "
                   f"shard (mostly {t.what}); this machine has {human(available)}")


def least_shards(shards: int | str) -> int:
    """The fewest shards a run may use: "auto" may choose one process (cluster/parallel/shard_plan.py)."""
    return 1 if isinstance(shards, str) else shards  # the one string a config allows is "auto"


def chip_issues(spec, mem: dict, noc: dict, run: dict) -> list:
    """[Issue] if a chip run's largest shard would not fit in this machine's memory (cluster/config/run.py)."""
    from cluster.config.schema import Issue
    from sim.memory.policies import POLICIES, MuGeometry
    from sim.network import NETWORKS

    n = spec.rows * spec.cols
    mus = n // 2  # a checkerboard: every other tile holds an MU (an upper bound with DRAM edges)
    policy = POLICIES.get(mem["policy"]).from_config(mem["policy"], mem)
    est = chip_estimate(spec.rows, spec.cols, mus, policy.footprint(MuGeometry(spec.mu_bytes)),
                        NETWORKS.get(noc["model"]).route_entry_bytes, least_shards(run["shards"]))
    found = problem(est, {GRID: f"{spec.rows} x {spec.cols}", "chip.mu_bytes": f"{spec.mu_bytes:,} bytes"})
    return [Issue(*found)] if found else []


def workload_issues(section: str, d: dict, available: int | None = None) -> list:
    """[Issue] if a workload's counts (``requests``; ``layers`` x ``heads`` buffers of ``max_batch``
    sequences) would need more than this machine's memory: read from the [workload.<section>] keys any
    workload of requests and KV heads has, before the workload is built."""
    from cluster.config.schema import Issue

    key = f"workload.{section}"
    terms = []
    if isinstance(d.get("requests"), int):
        terms.append(Term(REQUEST_BYTES * d["requests"], f"{key}.requests", f"{d['requests']:,} requests"))
    if all(isinstance(d.get(k), int) for k in ("layers", "heads", "max_batch")):
        live = 2 * d["layers"] * d["heads"] * d["max_batch"]
        driver = max(("layers", "heads", "max_batch"), key=lambda k: d[k])
        terms.append(Term(BUFFER_BYTES * live, f"{key}.{driver}",
                          f"{live:,} live KV buffers (2 x layers x heads x max_batch)"))
    if not terms:
        return []
    found = problem(Estimate(tuple(terms)), {t.key: f"{d[t.key.rsplit('.', 1)[1]]:,}" for t in terms}, available)
    return [Issue(*found)] if found else []


def points_problem(points: int, available: int | None = None) -> str | None:
    """The message if a sweep of ``points`` points would need more than this machine's memory to plan."""
    available = machine_bytes() if available is None else available
    need = POINT_BYTES * points
    if need <= available:
        return None
    return (f"{points:,} points would need about {human(need)} of memory to plan (about {human(POINT_BYTES)} a "
            f"point); this machine has {human(available)}")

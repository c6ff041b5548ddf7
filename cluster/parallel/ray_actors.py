"""Ray backend: one actor per shard, epochs chained actor to actor (or through the driver).

Every actor computes the same next window and the same stop decision from every shard's
report of the last epoch (cluster/parallel/epochs.py), which keeps the result bit-identical to the
in-process backend whatever carries the reports.

How epochs are chained is a measured choice (2-core machine; benchmarks/pdes_speed.py,
benchmarks/system_speed.py). ``direct`` (the default): each pair of actors shares a socket
(channels.py) and each actor runs epoch after epoch, sending each peer its report and
the traffic addressed to it; the driver only sees a segment end about once a second
(progress, failures). An exchange between two trivial actors costs 25-40 us, against
1.6 ms for a driver round trip (``driver``: ~6 ms with the machine loaded) and 0.5 ms for a
Ray compiled graph unrolling ``EPOCHS_PER_ROUND`` epochs (``compiled-graph``, whose
channel threads also competed with the simulation for the cores: a 64x64 half-grid
shard advanced an epoch in 11.3 ms instead of 6.8 ms). If the actors cannot reach each
other (a firewall between nodes), the run falls back to ``driver`` and says so.
"""

from __future__ import annotations

import importlib
import os
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from cluster.parallel import wire
from cluster.parallel.channels import ChannelAddress, ChannelClosed, Channels, cores_here, new_secret, polls
from cluster.parallel.epochs import WindowLengths, bounds_windows, first_window, meta_after, next_window
from cluster.parallel.groups import ShardGroup, actor_groups
from cluster.parallel.model import BackendFigures, EpochMeta, ProgressFn, R, Rep, RunOutcome, ShardModel, Stop, T
from cluster.parallel.ray_env import actor_cpus, cluster_cpus, init_ray

# Unrolling more epochs per compiled round did not lower the per-epoch cost (32x32, two
# shards: ~6 ms per epoch for 8, 16 or 32) but raised compile time (1.3 s -> 3.9 s) and
# actor memory (230 MB -> 480 MB, channel buffers), so rounds are short.
EPOCHS_PER_ROUND = 8
CHAININGS = ("direct", "driver", "compiled-graph")
_START = EpochMeta(0, 0, 0.0, 0.0, 0, 0)  # what every shard "reported" before the first epoch
SEGMENT_SECONDS = 1.0  # directly chained actors hand control back to the driver this often (progress)
# How long an actor polls for its peers' epochs (yielding the core between polls) before it
# sleeps on its sockets. Measured on the 2-core VM (benchmarks/chaining_speed.py, load 4-5):
# waking a sleeping process costs ~70 us there; an exchange of 2 / 3 / 4 trivial actors
# took 48 / 240 / 532 us polling against 80 / 280 / 739 us sleeping (polling without
# yielding: 30 us for 2 actors, but 4.7 ms for 3 on 2 cores).
SPIN_SECONDS = 2e-3


@dataclass(frozen=True, slots=True)
class ActorReport:
    """What a shard actor hands back when the run is over."""

    reports: list  # the model's report of each shard it ran, in shard order
    busy_seconds: float  # time spent advancing the shard
    handling_seconds: float  # time in its epoch calls spent otherwise: unpacking, earliest output, packing
    waiting_seconds: float  # of which, directly chained: sending its epoch and waiting for its peers'
    peak_rss_bytes: int
    windows: tuple[float, float]  # the windows it simulated: mean and median length (WindowLengths)
    epochs: int
    saturated: bool  # the stop rule cut the run off at its horizon
    end_cycle: int
    pid: int = 0  # the actor's process (a warm actor's serves run after run)


class ShardActor:
    """Holds one shard of a model, or a group of them (cluster/parallel/groups.py), and
    advances it one epoch per call. ``n``: the actors of the run, of which this is ``index``;
    ``groups``: the shards each actor runs (one each unless the shards outnumber the cores)."""

    def __init__(self, model: ShardModel[Any, Any, Any], regions: list[Any], index: int, n: int, epoch: int,
                 groups: list[list[int]] | None = None) -> None:
        self.model = model
        self.nothing = model.empty()  # the model's traffic type, to join and decode with
        self.groups = groups or [[j] for j in range(n)]
        mine = self.groups[index]
        self.shards = sum(len(g) for g in self.groups)
        self.shard: Any = (model.build(regions[0], mine[0]) if len(mine) == 1
                           else ShardGroup(model, regions, mine, self.shards, epoch))
        self.bounded = bounds_windows(self.shard, n)
        self.i, self.n, self.E = index, n, epoch
        self.busy = 0.0
        self.handling = 0.0
        self.epochs = 0
        self.stop: Stop | None = None
        self.windows = WindowLengths()
        self.channels: Channels | None = None  # direct chaining's channels to the peers
        self._metas: list[EpochMeta] = []  # direct chaining: every shard's report of the last epoch
        self._inbound: Any = None  # and the traffic they sent this shard
        self.spin = 0.0
        self.waiting = 0.0

    def _step(self, metas: list[EpochMeta], inbound) -> tuple[EpochMeta, list] | None:
        """The epoch after the one every shard reported in ``metas``, given the traffic
        they sent this shard: this shard's report and its output split by destination;
        None when the stop rule ends the run (the traffic is then kept in the shard)."""
        if self.epochs == 0:
            t0, t1 = first_window(self.E, self.model.horizon)
        else:
            stop = self.model.stop(metas)
            if stop.done:
                self.shard.deliver(inbound)
                self.stop = stop
                return None
            t0, t1 = next_window(metas, self.E, self.model.horizon)
        a = time.perf_counter()
        out = self.shard.advance(t0, t1, inbound)
        self.busy += time.perf_counter() - a
        self.epochs += 1
        self.windows.add(t1 - t0)
        return meta_after(self.shard, t0, t1, out, self.bounded), self._route(out)

    def _route(self, out) -> list:
        """This epoch's output, one part per actor."""
        if self.shards == self.n:
            return self.model.split(out, self.n)
        parts = self.model.split(out, self.shards)
        return [self.nothing.join([parts[j] for j in g]) for g in self.groups]

    def epoch(self, *outputs):
        """outputs[j] = shard j's packed output of the previous epoch; returns this shard's
        (an inactive report once the run is over: compiled rounds run on past the end)."""
        a = time.perf_counter()
        busy = self.busy
        out = self._epoch(outputs)
        self.handling += time.perf_counter() - a - (self.busy - busy)
        return out

    def _epoch(self, outputs):
        if self.stop is None:
            metas = [wire.meta_of(o) for o in outputs]
            nothing = self.nothing
            step = self._step(metas, nothing.join([wire.part_of(o, self.i, nothing) for o in outputs]))
            if step is not None:
                return wire.pack(step[0], step[1])
        last = wire.meta_of(outputs[0])
        idle = EpochMeta(last.t0, last.t1, float("inf"), float("inf"), last.created, last.finished, active=False)
        return wire.pack(idle, [self.nothing] * self.n)

    # -- direct chaining: the actors exchange epochs among themselves (channels.py) --

    def open_channels(self, spin: float) -> ChannelAddress:
        """Listen for the peers; ``spin``: seconds to poll for a peer's epoch before sleeping
        (none when the actors on this node outnumber its cores: channels.polls)."""
        self.spin = spin
        self.channels = _channels_here(self.i, self.n)
        return self.channels.address

    def connect(self, addresses: list[ChannelAddress], secret: bytes) -> None:
        """Join the peers at ``addresses``, each proving the run's ``secret`` (channels.py)."""
        assert self.channels is not None, "open_channels first"
        self.channels.connect(addresses, secret)
        if not polls(self.channels.actors_here, cores_here()):
            self.spin = 0.0
        self._metas = [_START] * self.n
        self._inbound = self.nothing

    def run_segment(self, seconds: float) -> Segment:
        """Run epochs, exchanging each directly with the peers, until the run ends or some
        actor has run ``seconds`` (all actors stop after the same epoch: the pause flag
        travels with the epoch's report)."""
        nothing, channels, start = self.nothing, self.channels, time.perf_counter()
        assert channels is not None, "open_channels and connect first"
        try:
            while True:
                busy = self.busy
                a = time.perf_counter()
                step = self._step(self._metas, self._inbound)
                if step is None:
                    channels.close()
                    return Segment(self._metas[0].t1, True)
                meta, parts = step
                pause = time.perf_counter() - start >= seconds
                outgoing = {j: wire.pack(meta, [parts[j]], pause) for j in range(self.n) if j != self.i}
                w = time.perf_counter()
                got = channels.exchange(outgoing, self.spin)
                self.waiting += time.perf_counter() - w
                self._metas = [meta if j == self.i else wire.meta_of(got[j]) for j in range(self.n)]
                self._inbound = nothing.join([parts[j] if j == self.i else wire.part_of(got[j], 0, nothing)
                                              for j in range(self.n)])
                self.handling += time.perf_counter() - a - (self.busy - busy)
                if pause or any(wire.pauses(got[j]) for j in range(self.n) if j != self.i):
                    return Segment(meta.t1, False)
        except BaseException:
            channels.close()  # the peers see the channel close and stop too
            raise

    def report(self) -> ActorReport:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # a warm host's: over its runs so far
        reports = self.shard.report() if isinstance(self.shard, ShardGroup) else [self.shard.report()]
        return ActorReport(reports, self.busy, self.handling, self.waiting, peak,
                           self.windows.stats(),
                           self.epochs, bool(self.stop and self.stop.saturated), self.shard.t, os.getpid())


class ShardHost:
    """A Ray actor serving one shard of a run at a time (a ShardActor); kept warm between runs
    (``warm_shards``), its process has imported the simulator and loaded the compiled kernels."""

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        self.actor: ShardActor | None = None
        for module in preload:  # what unpickling the run's model will import, imported while the driver pilots
            importlib.import_module(module)

    def load(self, model: ShardModel[Any, Any, Any], regions: list[Any], index: int, n: int, epoch: int,
             groups: list[list[int]] | None = None) -> None:
        self.actor = ShardActor(model, regions, index, n, epoch, groups)

    def _run(self) -> ShardActor:
        assert self.actor is not None, "load a shard first"
        return self.actor

    def epoch(self, *outputs):
        return self._run().epoch(*outputs)

    def open_channels(self, spin: float) -> ChannelAddress:
        return self._run().open_channels(spin)

    def connect(self, addresses: list[ChannelAddress], secret: bytes) -> None:
        self._run().connect(addresses, secret)

    def run_segment(self, seconds: float) -> Segment:
        return self._run().run_segment(seconds)

    def report(self) -> ActorReport:
        """The finished shard's report; the host lets the shard go and waits for the next run."""
        out, self.actor = self._run().report(), None
        return out


def _channels_here(index: int, n: int) -> Channels:
    """Shard actor ``index``'s channels, listening on the node this actor runs on."""
    import ray

    return Channels(index, n, ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address())


@dataclass(frozen=True, slots=True)
class Segment:
    """Where a run of directly chained epochs handed control back to the driver."""

    t1: int  # end of the last epoch simulated
    done: bool  # the stop rule ended the run


class _Echo:
    """A shard actor without a shard: what an epoch's exchange costs besides simulating."""

    def __init__(self, index: int, n: int) -> None:
        self.i, self.n = index, n
        self.channels: Channels | None = None

    def open_channels(self, spin: float) -> ChannelAddress:
        self.spin = spin
        self.channels = _channels_here(self.i, self.n)
        return self.channels.address

    def exchanges(self, addresses: list[ChannelAddress], secret: bytes, rounds: int) -> float:
        """Median seconds of one exchange of a small array with every peer."""
        assert self.channels is not None, "open_channels first"
        self.channels.connect(addresses, secret)
        arr = np.zeros(64, dtype=np.int64)
        times = []
        for _ in range(rounds):
            a = time.perf_counter()
            self.channels.exchange({j: arr for j in range(self.n) if j != self.i}, self.spin)
            times.append(time.perf_counter() - a)
        self.channels.close()
        return statistics.median(times)


def round_trip_seconds(n: int, address: str | None = None, rounds: int = 200, spin: float | None = None) -> float:
    """Seconds one epoch's exchange costs ``n`` trivial actors chained directly, as a run's
    actors are (cluster/parallel/shard_plan.py's per-epoch cost): the slowest actor's median.
    ``spin``: seconds to poll before sleeping (default: SPIN_SECONDS, as a run does)."""
    ray = init_ray(address)
    cpus = actor_cpus(cluster_cpus(), n)
    actors = [ray.remote(num_cpus=cpus)(_Echo).remote(i, n) for i in range(n)]
    try:
        spin = SPIN_SECONDS if spin is None else spin
        addresses = ray.get([x.open_channels.remote(spin) for x in actors])
        secret = new_secret()
        return max(ray.get([x.exchanges.remote(addresses, secret, rounds) for x in actors]))
    finally:
        for x in actors:
            ray.kill(x)


# the hosts of the innermost ``warm_shards`` block (None outside one): shape -> its hosts
_WARM: ContextVar[dict[tuple[int, float], list] | None] = ContextVar("rdasim_warm_shard_hosts", default=None)


@contextmanager
def warm_shards() -> Iterator[None]:
    """Within this block, Ray runs of this driver (directly chained, outside a sweep's
    bundles) keep their shard actors for the next run of as many shards: a fresh actor pays
    ~1 s of CPU before its first epoch (its process, imports, compiled kernels). The actors
    end with the block; a run of another shape ends them first (they hold the CPUs it needs).
    A block inside another shares the outer one's actors (its own would wait for their CPUs)."""
    if _WARM.get() is not None:
        yield
        return
    pool: dict[tuple[int, float], list] = {}
    token = _WARM.set(pool)
    try:
        yield
    finally:
        _WARM.reset(token)
        _end(pool)


def _end(pool: dict) -> None:
    import ray

    for hosts in pool.values():
        for h in hosts:
            ray.kill(h)
    pool.clear()


def _hosts(ray, n: int, cpus: float, pool: dict | None, preload: tuple[str, ...] = ()) -> list:
    """``n`` shard hosts of ``cpus`` CPUs each: warm ones from ``pool`` (keeping new ones
    there), or fresh ones when there is no pool."""
    Host = ray.remote(num_cpus=cpus)(ShardHost)
    if pool is None:
        return [Host.remote(preload) for _ in range(n)]
    if (n, cpus) not in pool:
        _end(pool)
        pool[(n, cpus)] = [Host.remote(preload) for _ in range(n)]
    return pool[(n, cpus)]


def _shape(n: int, pg) -> tuple[list[list[int]], float]:
    """The shards each actor of a run of ``n`` runs, and each actor's CPUs: shards beyond the
    cores share actors, one actor a core (groups.py); a sweep point's bundles were sized for
    one actor a shard, and its placement group ``pg`` (None outside a sweep) says their size."""
    groups = actor_groups(n, n if pg is not None else int(cluster_cpus()))
    cpus = pg.bundle_specs[0].get("CPU", 1.0) if pg is not None else actor_cpus(cluster_cpus(), len(groups))
    return groups, cpus


@contextmanager
def hosts_started(shards: int, address: str | None, preload: tuple[str, ...]) -> Iterator[None]:
    """Start the shard actors of a Ray run of ``shards`` now, importing ``preload`` (the model's
    modules), and keep them for the run inside this block: their processes start while the
    driver pilots the run (a fresh actor spends 0.5-1 s before it can take its shard). Outside
    a sweep's bundles only; the actors end with the block unless an outer ``warm_shards`` keeps them."""
    with warm_shards():
        ray = init_ray(address)
        if ray.util.get_current_placement_group() is None:
            groups, cpus = _shape(shards, None)
            _hosts(ray, len(groups), cpus, _WARM.get(), preload)
        yield


def _run_direct(ray, actors, horizon: int, progress) -> bool:
    """Chain the epochs actor to actor (channels.py); the driver only sees a segment end
    about every SEGMENT_SECONDS. False when the actors cannot open channels to each other."""
    addresses = ray.get([a.open_channels.remote(SPIN_SECONDS) for a in actors])
    secret = new_secret()  # this run's: only its actors can join its channels
    try:
        _get_all(ray, [a.connect.remote(addresses, secret) for a in actors])
    except ray.exceptions.RayTaskError as exc:
        if not isinstance(exc.cause, ChannelClosed):
            raise
        print(f"rdasim: warning: shard actors cannot reach each other ({exc.cause}); "
              "every epoch goes through the driver", file=sys.stderr)
        return False
    done = False
    while not done:
        segments = _get_all(ray, [a.run_segment.remote(SEGMENT_SECONDS) for a in actors])
        done = segments[0].done
        if progress is not None:
            progress(segments[0].t1, horizon)
    return True


def _get_all(ray, refs: list) -> list:
    """Every result of ``refs``; on failure, the error of the actor that failed first: its
    peers fail after it, seeing its channels close, and their errors only say so."""
    pending, echoes = list(refs), []
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        try:
            ray.get(ready[0])
        except ray.exceptions.RayTaskError as exc:
            if not isinstance(exc.cause, ChannelClosed):
                raise
            echoes.append(exc)
    if echoes:
        raise echoes[0]
    return ray.get(refs)


def _run_through_driver(ray, actors, model, horizon: int, progress, compiled: bool) -> str:
    """Chain the epochs through the driver: a round trip per epoch, or compiled rounds of
    EPOCHS_PER_ROUND epochs. Returns the chaining used."""
    outputs = _initial(len(actors), model)
    graph = None
    if compiled:
        try:
            graph = _compile_round(actors, EPOCHS_PER_ROUND)
        except Exception:  # noqa: BLE001 - any failure to compile: use the plain path
            graph = None
    while wire.meta_of(outputs[0]).active:
        if graph is not None:
            outputs = ray.get(graph.execute(*outputs))
        else:
            outputs = _get_all(ray, [a.epoch.remote(*outputs) for a in actors])
        if progress is not None:
            progress(wire.meta_of(outputs[0]).t1, horizon)
    if graph is not None:
        graph.teardown()
        return "compiled-graph"
    return "driver"


def _initial(n: int, model):
    return [wire.pack(_START, [model.empty()] * n) for _ in range(n)]


def _compile_round(actors, rounds: int):
    from ray.dag import InputNode, MultiOutputNode

    n = len(actors)
    with InputNode() as inp:
        prev = [inp[j] for j in range(n)]
        for _ in range(rounds):
            prev = [a.epoch.bind(*prev) for a in actors]
        dag = MultiOutputNode(prev)
    return dag.experimental_compile()


def run_ray(model: ShardModel[R, T, Rep], regions: list[R], epoch: int, address: str | None = None,
            progress: ProgressFn | None = None, chaining: str = "direct") -> RunOutcome[Rep]:
    """Run ``model`` with one actor per region, its epochs chained as ``chaining`` says (one of
    CHAININGS)."""
    if chaining not in CHAININGS:
        raise ValueError(f"unknown chaining {chaining!r}: one of {', '.join(CHAININGS)}")
    ray = init_ray(address)
    start = time.perf_counter()
    n = len(regions)
    pg = ray.util.get_current_placement_group()  # a sweep point: the driver sized our bundles
    groups, cpus = _shape(n, pg)
    # inside warm_shards, directly chained runs reuse their hosts; a sweep point's live in its bundles
    pool = _WARM.get() if chaining == "direct" and pg is None else None
    actors = _hosts(ray, len(groups), cpus, pool)
    horizon = model.horizon
    mode = chaining
    done = False
    try:
        _get_all(ray, [a.load.remote(model, [regions[j] for j in g], i, len(groups), epoch, groups)
                       for i, (a, g) in enumerate(zip(actors, groups))])
        if chaining == "direct" and not _run_direct(ray, actors, horizon, progress):
            mode = "driver"  # the actors could not reach each other: every epoch through the driver
        if mode != "direct":
            mode = _run_through_driver(ray, actors, model, horizon, progress, mode == "compiled-graph"
                                       and not (address or "").startswith("ray://"))
        results = ray.get([a.report.remote() for a in actors])
        done = True
    finally:
        if pool is not None and not (done and mode == "direct"):  # a failed run's hosts may hold its state
            _end(pool)
        elif pool is None:
            for a in actors:
                ray.kill(a)
    wall = time.perf_counter() - start
    transit = 0  # actors took their last inbound traffic into their calendars when they stopped
    first = results[0]
    busy = max(r.busy_seconds for r in results)
    # an actor's exchange time: everything but advancing its shard (packing, earliest
    # output, the driver round trip, waiting for the slowest shard)
    # figures per actor: an actor running several shards (groups.py) reports them together
    mean, median = first.windows
    figures = BackendFigures(mode, [r.busy_seconds for r in results], [wall - r.busy_seconds for r in results],
                             [r.peak_rss_bytes for r in results], mean, median,
                             waiting_seconds=[r.waiting_seconds for r in results],
                             handling_seconds=[r.handling_seconds for r in results],
                             actor_pids=[r.pid for r in results])
    return RunOutcome([rep for r in results for rep in r.reports], first.epochs, first.end_cycle, first.saturated,
                      wall, wall - busy, transit, figures)

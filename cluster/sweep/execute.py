"""Running points on Ray: one task per point (a placement group when it runs shard actors),
bounded in flight, retried after system failures, a point's own failure returned as data.

The driver submits at most ``limit`` points at a time and hands every finished point to
a callback as soon as it is done (which writes its file), so a killed driver loses only
the points in flight. Ray's own task retries are off: the executor retries a point
after a system failure (its worker, node or one of its shard actors died) up to
``max_retries`` times and counts the attempts; a point that raises becomes an error
outcome on the worker and is never retried.

Points much shorter than a Ray task's own cost (a few milliseconds of driver and raylet
time) run several to a task when ``batching`` is on: the batch grows until a task takes
about ``BATCH_SECONDS`` of measured job time, as joblib's ``batch_size="auto"`` sizes its
batches. Each point of a batch is still its own outcome, stored on its own; a batch that
dies of a system failure is run again one point per task, without counting that attempt
(which point killed it is unknown), so only a point that kills its worker uses up its retries.
"""

from __future__ import annotations

import time
import traceback as tb
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol, runtime_checkable

import pyarrow as pa

from cluster.errors import UserError
from cluster.parallel.ray_env import actor_cpus
from cluster.sweep.points import Point
from cluster.sweep.records import STATUS_ERROR, STATUS_OK, PointRun

if TYPE_CHECKING:
    from ray.util.placement_group import PlacementGroup


class SystemFailure(Exception):
    """Raised on a worker when the point died of something other than itself (a Ray failure)."""


@dataclass
class PointOutcome:
    """What a point's task returns to the driver."""

    status: str
    tables: dict[str, pa.Table] = field(default_factory=dict)
    node: str | None = None
    seconds: float = 0.0
    error: str | None = None
    traceback: str | None = None


@dataclass(frozen=True)
class Shape:
    """Resources of one point: a plain task of ``cpus``, or ``bundles`` bundles of ``cpus`` each."""

    cpus: float
    bundles: int = 0

    @property
    def total(self) -> float:
        return self.cpus * max(self.bundles, 1)


def shape_of(config: dict, cluster_cpus: float) -> Shape:
    """A point on the Ray backend with n > 1 shards runs n shard actors: one bundle each of
    ray_env.actor_cpus (the Ray backend takes its actors' size from these bundles). Anything
    else runs inside its task on one CPU."""
    run = config.get("run") or {}
    if run.get("shards") == "auto":
        raise UserError("run.shards = \"auto\" cannot be swept: a sweep reserves each point's cores up front; "
                        "give a count")
    shards = int(run.get("shards") or 1)
    if run.get("backend") == "ray" and shards > 1:
        return Shape(actor_cpus(cluster_cpus, shards), shards)
    return Shape(1.0)


def is_system_failure(exc: BaseException) -> bool:
    """Ray failures (dead worker, node, actor; lost object), not errors raised by the point's code."""
    from ray import exceptions as rx

    if isinstance(exc, rx.RayTaskError):
        return isinstance(getattr(exc, "cause", None), SystemFailure)
    return isinstance(exc, (rx.RayError, SystemFailure))


def run_point(command: str, config: dict) -> PointOutcome:
    """Body of a point's Ray task: run the command's job and return its tables or its error."""
    import ray

    return job_outcome(command, config, ray.get_runtime_context().get_node_id())


def run_batch(command: str, configs: list[dict]) -> list[PointOutcome]:
    """Body of a batch's Ray task: each point's outcome, in order."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    return [job_outcome(command, config, node) for config in configs]


def job_outcome(command: str, config: dict, node: str | None) -> PointOutcome:
    """Run one point's job here; its own exceptions become an error outcome."""
    from cluster.sweep.commands import get

    start = time.perf_counter()
    try:
        tables = get(command).job(config).tables
        return PointOutcome(STATUS_OK, tables, node, time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - a point's own failure is data, not a crash
        if is_system_failure(exc):
            raise SystemFailure(f"{type(exc).__name__}: {exc}") from exc
        message = str(exc).strip() or type(exc).__name__
        return PointOutcome(STATUS_ERROR, {}, node, time.perf_counter() - start,
                       f"{type(exc).__name__}: {message}", tb.format_exc())


@runtime_checkable
class Feed(Protocol):
    """Points handed out one at a time as room appears (an explorer asks its optimiser for each).

    ``take`` gives the next point to run, or None when none is ready until a running point
    finishes; ``exhausted`` is true once no point will come any more. A take may settle points
    itself (an explorer's cached or rejected trials); after a take that gives None with nothing
    in flight, the feed must be exhausted."""

    def take(self) -> Point | None: ...

    def exhausted(self) -> bool: ...


class ListFeed:
    """A fixed list of points (a sweep), in order."""

    def __init__(self, points: list[Point]):
        self._queue = deque(points)

    def take(self) -> Point | None:
        return self._queue.popleft() if self._queue else None

    def exhausted(self) -> bool:
        return not self._queue


def as_feed(points: list[Point] | Feed) -> Feed:
    return points if isinstance(points, Feed) else ListFeed(points)


class StalledFeed(RuntimeError):
    """A feed gave no point with nothing in flight (nothing could ever finish to unblock it)."""


BATCH_SECONDS = 0.1  # job time a batch aims at: 20x and more a task's own cost on a loaded 2-core driver
MAX_BATCH = 1_000  # points a batch holds at most (what a killed driver loses at most, per task in flight)


@dataclass
class _Flight:
    """One Ray task in flight: one point (``attempt`` its start), or a batch of first attempts."""

    points: list[Point]
    attempt: int
    pg: PlacementGroup | None = None

    @property
    def point(self) -> Point:
        return self.points[0]


class Executor:
    """Submits points to Ray with bounded concurrency and reports each finished one."""

    def __init__(self, ray, command: str, max_retries: int, max_concurrency: int | None, batching: bool = False):
        self.ray = ray
        self.command = command
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.task = ray.remote(max_retries=0, retry_exceptions=False)(run_point)
        self.batch_task = ray.remote(max_retries=0, retry_exceptions=False)(run_batch) if batching else None
        self.batch = 1  # points the next task takes (batching: grows with the measured job time)
        self._held: _Flight | None = None  # a sharded point taken while filling a batch: submitted next
        self._cpus_checked = float("-inf")
        self._cpus = 1.0

    def cluster_cpus(self) -> float:
        """Cluster CPUs, re-read every few seconds (an autoscaling cluster grows)."""
        now = time.monotonic()
        if now - self._cpus_checked > 5.0:
            self._cpus = float(self.ray.cluster_resources().get("CPU", 0.0))
            self._cpus_checked = now
        return self._cpus

    def _room(self, inflight: dict) -> int:
        """Points that may be submitted now (0: none)."""
        if self.max_concurrency is not None:
            return max(self.max_concurrency - sum(len(f.points) for f in inflight.values()), 0)
        # default: twice what the cluster holds, so the next point is queued when one ends
        # (and an autoscaler sees demand); at least 2 in flight
        used = sum(shape_of(f.point.config, self._cpus).total for f in inflight.values())
        return self.batch if not inflight or len(inflight) < 2 or used < 2 * self.cluster_cpus() else 0

    def _next(self, feed: Feed, room: int) -> _Flight | None:
        """A new flight of up to ``room`` points from the feed: one point, or with batching a batch of
        plain (one-CPU) points; a sharded point always flies alone."""
        point = feed.take()
        if point is None:
            return None
        flight = _Flight([point], 1)
        size = min(self.batch, room)
        while self.batch_task is not None and len(flight.points) < size and not feed.exhausted() and \
                not shape_of(point.config, self._cpus).bundles:
            point = feed.take()
            if point is None:
                break
            if shape_of(point.config, self._cpus).bundles:
                self._held = _Flight([point], 1)  # next, on its own
                break
            flight.points.append(point)
        return flight

    def _learn(self, outcomes: list[PointOutcome]) -> None:
        """Size the next batches from the job time of the points that just finished (at most doubling)."""
        if self.batch_task is None or not outcomes:
            return
        mean = max(sum(o.seconds for o in outcomes) / len(outcomes), 1e-5)
        self.batch = max(1, min(round(BATCH_SECONDS / mean), 2 * self.batch, MAX_BATCH))

    def _submit(self, flight: _Flight):
        shape = shape_of(flight.point.config, self.cluster_cpus())
        if shape.bundles:
            from ray.util.placement_group import placement_group
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            flight.pg = placement_group([{"CPU": shape.cpus}] * shape.bundles, strategy="PACK")
            strategy = PlacementGroupSchedulingStrategy(flight.pg, placement_group_capture_child_tasks=True)
            return self.task.options(num_cpus=0, scheduling_strategy=strategy).remote(self.command, flight.point.config)
        if len(flight.points) > 1 and self.batch_task is not None:
            return self.batch_task.options(num_cpus=shape.cpus).remote(self.command, [p.config for p in flight.points])
        return self.task.options(num_cpus=shape.cpus).remote(self.command, flight.point.config)

    def _release(self, flight: _Flight) -> None:
        if flight.pg is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(flight.pg)
            except Exception:  # noqa: BLE001 - already gone with its node
                pass

    def run(self, points: list[Point] | Feed, done: Callable[[Point, PointOutcome | None, PointRun], None],
            tick: Callable[[], None] = lambda: None, started: Callable[[Point], None] = lambda p: None) -> None:
        """Run every point; call ``started(point)`` as it is submitted and ``done(point, outcome, run)`` once per
        point, as it finishes."""
        feed = as_feed(points)
        queue: deque[_Flight] = deque()  # retries, before new points
        inflight: dict = {}
        self._held = None
        try:
            while queue or inflight or self._held or not feed.exhausted():
                while room := self._room(inflight):
                    flight: _Flight | None
                    if queue:
                        flight = queue.popleft()
                    elif self._held is not None:
                        flight, self._held = self._held, None
                    else:
                        flight = self._next(feed, room)
                    if flight is None:
                        break
                    inflight[self._submit(flight)] = flight
                    for point in flight.points:  # a batch's points run one after another in its task
                        started(point)
                if not inflight:
                    if feed.exhausted():
                        break
                    raise StalledFeed("the feed gave no point with nothing in flight")
                ready, _ = self.ray.wait(list(inflight), num_returns=1, timeout=0.5)
                if ready:
                    rest = [r for r in inflight if r not in ready]
                    more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0) if rest else ([], [])
                    ready += more
                for ref in ready:
                    flight = inflight.pop(ref)
                    queue.extendleft(reversed(self._finish(ref, flight, done)))
                tick()
        finally:
            for flight in inflight.values():
                self._release(flight)

    def _finish(self, ref, flight: _Flight, done) -> list[_Flight]:
        """Report the points of a finished flight; the flights to retry."""
        try:
            got = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - classified below
            self._release(flight)
            if is_system_failure(exc) and len(flight.points) > 1:
                # which point killed the batch is unknown: each is run again alone, its attempt not counted,
                # so the culprit alone uses up its retries
                return [_Flight([p], flight.attempt) for p in flight.points]
            if is_system_failure(exc) and flight.attempt <= self.max_retries:
                return [_Flight(flight.points, flight.attempt + 1)]
            kind = "system failure" if is_system_failure(exc) else "failure outside the job"
            message = f"{kind} after {flight.attempt} attempt{'s' if flight.attempt > 1 else ''}: " \
                      f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            done(flight.point, None, PointRun(STATUS_ERROR, flight.attempt, error=message,
                                              traceback="".join(tb.format_exception(exc))))
            return []
        self._release(flight)
        outcomes = got if len(flight.points) > 1 else [got]
        self._learn(outcomes)
        for point, outcome in zip(flight.points, outcomes):
            done(point, outcome, PointRun(outcome.status, flight.attempt, outcome.node, outcome.seconds,
                                          outcome.error, outcome.traceback))
        return []


class InProcessExecutor:
    """Runs the points one after another in this process, without Ray (debugging, tests)."""

    def __init__(self, command: str):
        self.command = command

    def run(self, points: list[Point] | Feed, done: Callable[[Point, PointOutcome | None, PointRun], None],
            tick: Callable[[], None] = lambda: None, started: Callable[[Point], None] = lambda p: None) -> None:
        feed = as_feed(points)
        while not feed.exhausted():
            point = feed.take()
            if point is None:
                if feed.exhausted():  # taking settled the last points without running them
                    break
                raise StalledFeed("the feed gave no point with nothing in flight")
            started(point)
            o = job_outcome(self.command, point.config, "in-process")
            done(point, o, PointRun(o.status, 1, o.node, o.seconds, o.error, o.traceback))
            tick()

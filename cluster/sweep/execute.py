"""Running points on Ray: one task per point (a placement group when it runs shard actors),
bounded in flight, retried after system failures, a point's own failure returned as data.

The driver submits at most ``limit`` points at a time and hands every finished point to
a callback as soon as it is done (which writes its file), so a killed driver loses only
the points in flight. Ray's own task retries are off: the executor retries a point
after a system failure (its worker, node or one of its shard actors died) up to
``max_retries`` times and counts the attempts; a point that raises becomes an error
outcome on the worker and is never retried.
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


@dataclass
class _Flight:
    point: Point
    attempt: int
    pg: PlacementGroup | None = None


def _new_flight(feed: Feed) -> _Flight | None:
    point = feed.take()
    return None if point is None else _Flight(point, 1)


class Executor:
    """Submits points to Ray with bounded concurrency and reports each finished one."""

    def __init__(self, ray, command: str, max_retries: int, max_concurrency: int | None):
        self.ray = ray
        self.command = command
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.task = ray.remote(max_retries=0, retry_exceptions=False)(run_point)
        self._cpus_checked = float("-inf")
        self._cpus = 1.0

    def cluster_cpus(self) -> float:
        """Cluster CPUs, re-read every few seconds (an autoscaling cluster grows)."""
        now = time.monotonic()
        if now - self._cpus_checked > 5.0:
            self._cpus = float(self.ray.cluster_resources().get("CPU", 0.0))
            self._cpus_checked = now
        return self._cpus

    def _room(self, inflight: dict) -> bool:
        if self.max_concurrency is not None:
            return len(inflight) < self.max_concurrency
        # default: twice what the cluster holds, so the next point is queued when one ends
        # (and an autoscaler sees demand); at least 2 in flight
        used = sum(shape_of(f.point.config, self._cpus).total for f in inflight.values())
        return not inflight or len(inflight) < 2 or used < 2 * self.cluster_cpus()

    def _submit(self, flight: _Flight):
        shape = shape_of(flight.point.config, self.cluster_cpus())
        if shape.bundles:
            from ray.util.placement_group import placement_group
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            flight.pg = placement_group([{"CPU": shape.cpus}] * shape.bundles, strategy="PACK")
            strategy = PlacementGroupSchedulingStrategy(flight.pg, placement_group_capture_child_tasks=True)
            return self.task.options(num_cpus=0, scheduling_strategy=strategy).remote(self.command, flight.point.config)
        return self.task.options(num_cpus=shape.cpus).remote(self.command, flight.point.config)

    def _release(self, flight: _Flight) -> None:
        if flight.pg is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(flight.pg)
            except Exception:  # noqa: BLE001 - already gone with its node
                pass

    def run(self, points: list[Point] | Feed, done: Callable[[Point, PointOutcome | None, PointRun], None],
            tick: Callable[[], None] = lambda: None) -> None:
        """Run every point; call ``done(point, outcome, run)`` once per point, as it finishes."""
        feed = as_feed(points)
        queue: deque[_Flight] = deque()  # retries, before new points
        inflight: dict = {}
        try:
            while queue or inflight or not feed.exhausted():
                while self._room(inflight):
                    flight = queue.popleft() if queue else _new_flight(feed)
                    if flight is None:
                        break
                    inflight[self._submit(flight)] = flight
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
                    retry = self._finish(ref, flight, done)
                    if retry is not None:
                        queue.appendleft(retry)
                tick()
        finally:
            for flight in inflight.values():
                self._release(flight)

    def _finish(self, ref, flight: _Flight, done) -> _Flight | None:
        try:
            outcome = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - classified below
            self._release(flight)
            if is_system_failure(exc) and flight.attempt <= self.max_retries:
                return _Flight(flight.point, flight.attempt + 1)
            kind = "system failure" if is_system_failure(exc) else "failure outside the job"
            message = f"{kind} after {flight.attempt} attempt{'s' if flight.attempt > 1 else ''}: " \
                      f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            done(flight.point, None, PointRun(STATUS_ERROR, flight.attempt, error=message,
                                              traceback="".join(tb.format_exception(exc))))
            return None
        self._release(flight)
        done(flight.point, outcome, PointRun(outcome.status, flight.attempt, outcome.node, outcome.seconds,
                                             outcome.error, outcome.traceback))
        return None


class InProcessExecutor:
    """Runs the points one after another in this process, without Ray (debugging, tests)."""

    def __init__(self, command: str):
        self.command = command

    def run(self, points: list[Point] | Feed, done: Callable[[Point, PointOutcome | None, PointRun], None],
            tick: Callable[[], None] = lambda: None) -> None:
        feed = as_feed(points)
        while not feed.exhausted():
            point = feed.take()
            if point is None:
                if feed.exhausted():  # taking settled the last points without running them
                    break
                raise StalledFeed("the feed gave no point with nothing in flight")
            o = job_outcome(self.command, point.config, "in-process")
            done(point, o, PointRun(o.status, 1, o.node, o.seconds, o.error, o.traceback))
            tick()

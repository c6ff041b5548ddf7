"""The executor's scheduling logic against a stand-in for Ray: bounded in flight, system
failures retried up to the limit, a point's own error never retried, short points batched."""

from ray import exceptions as rx

from cluster.sweep.execute import (
    BATCH_SECONDS,
    Executor,
    PointOutcome,
    Shape,
    SystemFailure,
    is_system_failure,
    run_batch,
    shape_of,
)
from cluster.sweep.points import Point


class FakeRay:
    """Runs a task when it is waited for; ``script[value]`` lists what each attempt does; a point's job
    takes ``seconds``."""

    def __init__(self, script, cpus=4.0, seconds=0.1):
        self.script = script
        self.cpus = cpus
        self.seconds = seconds
        self.in_flight = 0
        self.most_in_flight = 0
        self.results = {}
        self.started = []
        self.batches = []  # the points of each task, in submission order

    def cluster_resources(self):
        return {"CPU": self.cpus}

    def remote(self, **options):
        return lambda fn: _BatchTask(self) if fn is run_batch else _Task(self)

    def wait(self, refs, num_returns=1, timeout=None):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        self.in_flight -= 1
        result = self.results.pop(ref)
        if isinstance(result, BaseException):
            raise result
        return result


class _Task:
    def __init__(self, ray):
        self.ray = ray

    def options(self, **options):
        return self

    def attempt(self, config):
        """What this attempt of the point does: its outcome, or the Ray error that kills its task."""
        ray = self.ray
        value = config["noop"]["value"]
        ray.started.append(value)
        attempt = ray.started.count(value) - 1
        outcomes = ray.script.get(value, ["ok"])
        what = outcomes[min(attempt, len(outcomes) - 1)]
        return {
            "ok": PointOutcome("ok", {}, "n1", ray.seconds),
            "error": PointOutcome("error", {}, "n1", ray.seconds, "ValueError: bad", "Traceback ..."),
            "crash": rx.WorkerCrashedError(),
            "node": rx.NodeDiedError("node died"),
        }[what]

    def submit(self, result, values):
        ray = self.ray
        ref = object()
        ray.results[ref] = result
        ray.batches.append(values)
        ray.in_flight += 1
        ray.most_in_flight = max(ray.most_in_flight, ray.in_flight)
        return ref

    def remote(self, command, config):
        return self.submit(self.attempt(config), [config["noop"]["value"]])


class _BatchTask(_Task):
    def remote(self, command, configs):
        outcomes = []
        for config in configs:  # the points run in turn until one kills the worker, and the task with it
            outcome = self.attempt(config)
            if isinstance(outcome, BaseException):
                return self.submit(outcome, [c["noop"]["value"] for c in configs])
            outcomes.append(outcome)
        return self.submit(outcomes, [c["noop"]["value"] for c in configs])


def _points(n):
    return [Point(i, f"p{i}", {"noop.value": i}, {"noop": {"value": i}, "run": {"shards": 1}}) for i in range(n)]


def _run(script, n=6, max_retries=2, max_concurrency=None, cpus=4.0, seconds=0.1, batching=False):
    ray = FakeRay(script, cpus, seconds)
    done = []
    Executor(ray, "noop", max_retries, max_concurrency, batching).run(_points(n),
                                                                     lambda p, o, r: done.append((p.index, r)))
    assert sorted(i for i, _ in done) == list(range(n))  # every point reported exactly once
    return ray, dict(done)


def test_short_points_run_many_to_a_task_each_reported_on_its_own():
    ray, done = _run({}, n=2_000, seconds=0.001, batching=True, cpus=2.0)
    sizes = [len(b) for b in ray.batches]
    assert sizes[:2] == [1, 1] and max(sizes) == round(BATCH_SECONDS / 0.001)  # grown by doubling, to 0.1 s of jobs
    assert len(sizes) < 2_000 / 20 and ray.most_in_flight == 4  # tasks in flight: twice the CPUs, as unbatched
    assert all(r.status == "ok" and r.attempts == 1 for r in done.values())
    ray, _ = _run({}, n=50, seconds=0.5, batching=True)  # points longer than a batch's aim: one per task
    assert all(len(b) == 1 for b in ray.batches)
    ray, _ = _run({}, n=200, seconds=0.001, batching=True, max_concurrency=3)  # at most 3 points in flight
    assert max(len(b) for b in ray.batches) <= 3 and ray.most_in_flight <= 3


def test_a_batch_killed_by_one_point_reruns_its_points_alone_and_only_the_culprit_uses_its_retries():
    ray, done = _run({40: ["crash"]}, n=300, seconds=0.001, batching=True, max_retries=2)
    (batch,) = [b for b in ray.batches if 40 in b and len(b) > 1]
    assert (done[40].status, done[40].attempts) == ("error", 3)  # alone: 1 + max_retries, as unbatched
    assert done[40].error.startswith("system failure after 3 attempts")
    for value in batch:  # its batch mates: run again alone, their first attempt not counted against them
        if value != 40:
            assert (done[value].status, done[value].attempts) == ("ok", 1)
            assert [len(b) for b in ray.batches if value in b][-1] == 1


def test_at_most_max_concurrency_points_are_in_flight():
    ray, done = _run({}, n=10, max_concurrency=3)
    assert ray.most_in_flight == 3 and sorted(done) == list(range(10))
    ray, _ = _run({}, n=20, cpus=2.0)  # default: twice what the CPUs hold
    assert ray.most_in_flight == 4


def test_system_failures_are_retried_up_to_the_limit_and_own_errors_never():
    ray, done = _run({1: ["crash", "ok"], 2: ["node", "crash", "crash", "ok"], 3: ["error", "ok"]})
    assert (done[1].status, done[1].attempts) == ("ok", 2)
    assert (done[2].status, done[2].attempts) == ("error", 3)  # 1 + max_retries
    assert done[2].error.startswith("system failure after 3 attempts: WorkerCrashedError")
    assert (done[3].status, done[3].attempts, done[3].error) == ("error", 1, "ValueError: bad")
    assert ray.started.count(3) == 1 and ray.started.count(2) == 3
    assert all(done[i].status == "ok" and done[i].attempts == 1 for i in (0, 4, 5))


def test_what_counts_as_a_system_failure():
    assert is_system_failure(rx.WorkerCrashedError()) and is_system_failure(rx.NodeDiedError("x"))
    assert is_system_failure(rx.ActorDiedError()) and is_system_failure(SystemFailure("x"))
    assert not is_system_failure(ValueError("x"))
    wrapped = rx.RayTaskError("run_point", "tb", SystemFailure("actor died"))
    assert is_system_failure(wrapped)
    assert not is_system_failure(rx.RayTaskError("run_point", "tb", ValueError("bad")))


def test_sharded_ray_points_reserve_one_bundle_per_shard():
    ray4 = {"run": {"shards": 4, "backend": "ray"}}
    assert shape_of(ray4, 8.0) == Shape(1.0, 4)  # a CPU per shard actor
    assert shape_of(ray4, 2.0) == Shape(0.5, 4)  # fewer CPUs than shards: all shards still run at once
    assert shape_of({"run": {"shards": 4, "backend": "local"}}, 8.0).bundles == 0  # in-process shards
    assert shape_of({"noop": {}}, 8.0).total == 1.0


def test_a_sharded_point_s_actors_take_the_size_of_the_bundles_the_driver_reserved(ray_session):
    """The driver sizes a sharded point's bundles once (ray_env.actor_cpus) and the Ray backend
    takes its actors' size from them. If the backend computed its own size (as it did) and the
    cluster had grown or shrunk since the driver looked, its actors would not fit their bundles
    and the point would wait forever: here the driver saw 1 CPU (bundles of 0.5) on a 2-CPU Ray."""
    import threading
    import time

    from cluster.config import config_hash, load
    from cluster.config.noc import NOC_SCHEMA

    cfg = load(NOC_SCHEMA, raw={"noc": {"k": 4, "rate": 0.1, "warmup_cycles": 100, "measure_cycles": 200},
                                "run": {"shards": 2, "backend": "ray"}})
    executor = Executor(ray_session, "noc", 0, None)
    executor._cpus, executor._cpus_checked = 1.0, time.monotonic() + 3600  # the size it saw, kept
    assert shape_of(cfg, executor.cluster_cpus()) == Shape(0.5, 2)
    done = []
    worker = threading.Thread(target=executor.run, args=([Point(0, config_hash(cfg), {}, cfg)],
                                                         lambda p, o, r: done.append(r)), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert done and done[0].status == "ok", "the point's shard actors never got their bundles"

"""The executor's scheduling logic against a stand-in for Ray: bounded in flight, system
failures retried up to the limit, a point's own error never retried."""

from ray import exceptions as rx

from cluster.sweep.execute import Executor, PointOutcome, Shape, SystemFailure, is_system_failure, shape_of
from cluster.sweep.points import Point


class FakeRay:
    """Runs a task when it is waited for; ``script[value]`` lists what each attempt does."""

    def __init__(self, script, cpus=4.0):
        self.script = script
        self.cpus = cpus
        self.in_flight = 0
        self.most_in_flight = 0
        self.results = {}
        self.started = []

    def cluster_resources(self):
        return {"CPU": self.cpus}

    def remote(self, **options):
        return lambda fn: _Task(self)

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

    def remote(self, command, config):
        ray = self.ray
        value = config["noop"]["value"]
        ray.started.append(value)
        attempt = ray.started.count(value) - 1
        outcomes = ray.script.get(value, ["ok"])
        what = outcomes[min(attempt, len(outcomes) - 1)]
        ref = object()
        ray.results[ref] = {
            "ok": PointOutcome("ok", {}, "n1", 0.1),
            "error": PointOutcome("error", {}, "n1", 0.1, "ValueError: bad", "Traceback ..."),
            "crash": rx.WorkerCrashedError(),
            "node": rx.NodeDiedError("node died"),
        }[what]
        ray.in_flight += 1
        ray.most_in_flight = max(ray.most_in_flight, ray.in_flight)
        return ref


def _points(n):
    return [Point(i, f"p{i}", {"noop.value": i}, {"noop": {"value": i}, "run": {"shards": 1}}) for i in range(n)]


def _run(script, n=6, max_retries=2, max_concurrency=None, cpus=4.0):
    ray = FakeRay(script, cpus)
    done = []
    Executor(ray, "noop", max_retries, max_concurrency).run(_points(n), lambda p, o, r: done.append((p.index, r)))
    return ray, dict(done)


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

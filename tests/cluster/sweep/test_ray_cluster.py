"""Sweeps on a real multi-node Ray cluster on this machine.

One session-scoped cluster: a head (2 CPUs) and a second node (1 CPU) with different
custom resources, each started with `ray start` in its own temp dir and ports, with
Ray 2.60 token authentication on every node and client. Every sweep runs as a separate
driver process (`python -m cluster.cli sweep ... --address`), so a driver can be killed.
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from cluster.sweep.dataset import read_dataset, table_dir
from cluster.sweep.layout import point_of
from cluster.sweep.plan import plan_sweep
from tests.paths import EXAMPLES

pytestmark = pytest.mark.ray
RAY = str(Path(sys.executable).with_name("ray")) if Path(sys.executable).with_name("ray").exists() \
    else shutil.which("ray") or "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line), from /proc."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(d.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmd)
    return out


def _kill_matching(*needles: str) -> int:
    """SIGKILL every process whose command line contains a needle, with all its descendants."""
    procs = _processes()
    victims = {pid for pid, (_, cmd) in procs.items() if any(n in cmd for n in needles)}
    grew = True
    while grew:
        more = {pid for pid, (ppid, _) in procs.items() if ppid in victims} - victims
        victims |= more
        grew = bool(more)
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(victims)


class Cluster:
    """A head and a worker node started with `ray start`; killed by pid on teardown."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="rds", dir="/tmp"))  # short: Ray's socket paths
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # `rdasim` for ray jobs
        self.env = {**os.environ, "PATH": path, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
                    "RAY_USAGE_STATS_ENABLED": "0"}
        self.port = _free_port()
        self.client_port = _free_port()
        self.dashboard = f"http://127.0.0.1:{_free_port()}"
        self.address = f"127.0.0.1:{self.port}"
        self.workers = 0
        self._start("h", "--head", "--port", str(self.port), "--num-cpus", "2",
                    "--resources", '{"rdasim_head": 1}', "--include-dashboard", "true",
                    "--dashboard-port", self.dashboard.rsplit(":", 1)[1],
                    "--ray-client-server-port", str(self.client_port))
        self.start_worker()

    def _start(self, name: str, *args: str) -> None:
        cmd = [RAY, "start", *args, "--temp-dir", str(self.root / name), "--disable-usage-stats",
               "--dashboard-agent-listen-port", str(_free_port()), "--object-store-memory", str(150 * 2**20)]
        subprocess.run(cmd, env=self.env, check=True, capture_output=True, timeout=120)

    def start_worker(self) -> None:
        self.workers += 1
        self._start(f"w{self.workers}", "--address", self.address, "--num-cpus", "1",
                    "--resources", '{"rdasim_worker": 1}')

    def worker_node_id(self) -> str:
        """The Ray node id of the current second node (from its raylet's command line)."""
        needle = f"{self.root}/w{self.workers}/"
        for _, cmd in _processes().values():
            if "raylet/raylet" in cmd and needle in cmd:
                return cmd.split("--node_id=", 1)[1].split()[0]
        raise AssertionError("the second node's raylet is not running")

    def node_ids(self) -> set[str]:
        """Ray node ids of every node of this cluster (from their raylets' command lines)."""
        return {cmd.split("--node_id=", 1)[1].split()[0] for _, cmd in _processes().values()
                if "raylet/raylet" in cmd and f"{self.root}/" in cmd}

    def kill_worker(self) -> None:
        assert _kill_matching(f"{self.root}/w{self.workers}/") > 0

    def sweep(self, spec: Path, out: Path, *extra: str, wait: bool = True, address: str | None = None,
              env: dict | None = None):
        cmd = [sys.executable, "-m", "cluster.cli", "sweep", str(spec), "--out", str(out),
               "--address", address or self.address, "--quiet", *extra]
        proc = subprocess.Popen(cmd, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if wait:
            _, err = proc.communicate(timeout=180)
            proc.stderr_text = err
        return proc

    def close(self) -> None:
        _kill_matching(str(self.root), f"--port={self.client_port}")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    try:
        yield c
    finally:
        c.close()


def _spec(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def _wait_for_files(root: Path, n: int, proc, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while len(list(root.rglob("*.parquet"))) < n:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < end, "the sweep made no progress"
        time.sleep(0.1)


def _exactly_once(out: Path, name: str, spec: Path) -> list[dict]:
    """Every planned point has exactly one file, named by its id, and no other file exists."""
    files = sorted(table_dir(out / name).rglob("*.parquet"))  # the result rows
    ids = [p.id for p in plan_sweep(spec).points]
    assert sorted(point_of(f) for f in files) == sorted(ids)
    assert not list(out.rglob("*.parquet.*"))  # no temporary files left over
    return read_dataset(out / name).to_pylist()


NOC = """
[sweep]
name = "noc"
command = "noc"
partition_by = ["run.seed"]

[base]
noc.rows = 4
noc.cols = 4
noc.warmup_cycles = 100
noc.measure_cycles = 300

[axes]
noc.rate = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3]
run.seed = [1, 2]

[[points]]   # fails by itself: transpose needs a square grid
noc.cols = 8
noc.traffic = "transpose"

[[points]]   # two shard actors in a placement group
noc.rate = 0.3
run.shards = 2
run.backend = "ray"
"""


@pytest.fixture(scope="session")
def noc_sweep(cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("noc")
    spec = _spec(tmp / "noc.toml", NOC)
    proc = cluster.sweep(spec, tmp / "out")
    return spec, tmp / "out", proc


def test_a_sweep_spreads_over_both_nodes_and_stores_every_point_once(noc_sweep):
    spec, out, proc = noc_sweep
    assert proc.returncode == 3, proc.stderr_text  # 3: finished, with a failed point
    rows = _exactly_once(out, "noc", spec)
    assert len(rows) == 14
    assert len({r["point_node"] for r in rows}) == 2  # the head and the second node


def test_a_failing_point_is_an_error_row(noc_sweep):
    spec, out, _ = noc_sweep
    bad = [r for r in read_dataset(out / "noc").to_pylist() if r["point_status"] == "error"]
    assert len(bad) == 1 and bad[0]["noc_traffic"] == "transpose" and bad[0]["point_attempts"] == 1
    assert "square grid" in bad[0]["point_error"] and "Traceback" in bad[0]["point_traceback"]
    status = subprocess.run([sys.executable, "-m", "cluster.cli", "sweep", "status", str(out), "--json"],
                            capture_output=True, text=True, check=True)
    got = json.loads(status.stdout)
    assert (got["done"], got["failed"], got["pending"]) == (13, 1, 0)


def test_the_dataset_reads_back_in_pyarrow_with_its_types(noc_sweep):
    _, out, _ = noc_sweep
    table = ds.dataset(out / "noc" / "noc_summary", format="parquet").to_table()
    types = {f.name: f.type for f in table.schema}
    assert types["run_seed"] == pa.int64() and types["noc_rate"] == pa.float64()
    assert types["noc_cols"] == pa.int64() and types["noc_traffic"] == pa.string()
    assert types["avg_latency"] == pa.float64() and types["saturated"] == pa.bool_()
    assert sorted(set(table.column("run_seed").to_pylist())) == [1, 2]


def test_a_sharded_point_runs_as_shard_actors_with_the_unsharded_result(noc_sweep):
    from cluster.config import load
    from cluster.config.noc import NOC_SCHEMA
    from cluster.jobs.noc import run_noc

    _, out, _ = noc_sweep
    rows = read_dataset(out / "noc", filter=ds.field("run_shards") == 2).to_pylist()
    assert len(rows) == 1 and rows[0]["point_status"] == "ok" and rows[0]["shards"] == 2
    base = {"rows": 4, "cols": 4, "warmup_cycles": 100, "measure_cycles": 300, "rate": 0.3}
    local = run_noc(load(NOC_SCHEMA, raw={"noc": base}), quiet=True)
    assert rows[0]["result_hash"] == local.summary["loads"][0]["result_hash"]


def test_system_failures_are_retried_up_to_the_limit(cluster, tmp_path):
    spec = _spec(tmp_path / "crash.toml", f"""
        [sweep]
        name = "crash"
        command = "noop"
        max_retries = 1
        [[points]]   # its worker dies once, then the retry succeeds
        noop.crash = true
        noop.crash_marker = "{tmp_path / 'marker'}"
        [[points]]   # its worker dies every time
        noop.crash = true
        noop.value = 2
        [[points]]
        noop.value = 3
    """)
    proc = cluster.sweep(spec, tmp_path / "out")
    assert proc.returncode == 3, proc.stderr_text
    rows = {r["point_index"]: r for r in _exactly_once(tmp_path / "out", "crash", spec)}
    assert (rows[0]["point_status"], rows[0]["point_attempts"]) == ("ok", 2)
    assert (rows[1]["point_status"], rows[1]["point_attempts"]) == ("error", 2)
    assert rows[1]["point_error"].startswith("system failure after 2 attempts")
    assert (rows[2]["point_status"], rows[2]["point_attempts"]) == ("ok", 1)


SLOW = """
[sweep]
name = "{name}"
command = "noop"
partition_by = ["noop.value"]
[base]
noop.sleep = {sleep}
[axes]
noop.value = {values}
"""


def test_a_sweep_runs_as_a_ray_job_with_its_spec_uploaded(cluster, tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "base.toml").write_text("[noop]\nsleep = 0.05\n")
    _spec(specs / "job.toml", 'base = "base.toml"\n' + SLOW.format(name="job", sleep=0.05, values=[1, 2, 3])
          .replace("[base]\nnoop.sleep = 0.05\n", ""))
    out = tmp_path / "out"
    # no --address: the driver must join the cluster Ray Jobs put in RAY_ADDRESS, not start its own Ray
    job = subprocess.run([RAY, "job", "submit", "--address", cluster.dashboard, "--working-dir", str(specs), "--",
                          "rdasim", "sweep", "job.toml", "--out", str(out), "--quiet"],
                         env=cluster.env, capture_output=True, text=True, timeout=180)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-2000:]
    rows = _exactly_once(out, "job", specs / "job.toml")
    assert [r["slept"] for r in rows] == [0.05] * 3  # the uploaded base file was used
    assert {r["point_node"] for r in rows} <= cluster.node_ids()  # ran on the cluster's nodes


def test_a_sweep_without_address_runs_on_the_cluster_in_ray_address(cluster, tmp_path):
    spec = _spec(tmp_path / "ra.toml", SLOW.format(name="ra", sleep=0.3, values=list(range(9))))
    env = {**cluster.env, "RAY_ADDRESS": cluster.address}
    proc = subprocess.run([sys.executable, "-m", "cluster.cli", "sweep", str(spec), "--out", str(tmp_path / "out"),
                           "--quiet"], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    nodes = {r["point_node"] for r in _exactly_once(tmp_path / "out", "ra", spec)}
    assert nodes <= cluster.node_ids() and len(nodes) == 2  # both nodes of the cluster, no embedded Ray


def _jobs(cluster) -> int:
    got = subprocess.run([RAY, "list", "jobs", "--address", cluster.dashboard, "--format", "json", "--limit", "1000"],
                         env=cluster.env, capture_output=True, text=True, timeout=60, check=True)
    return len(json.loads(got.stdout))


@pytest.mark.parametrize("command", ["noc", "run"])
def test_noc_and_run_on_the_ray_backend_join_the_cluster_in_ray_address(cluster, command, tmp_path):
    before = _jobs(cluster)
    args = (["noc", "--k", "4", "--rates", "0.1,0.2", "--set", "noc.measure_cycles=300"] if command == "noc" else
            ["run", str(EXAMPLES / "race.toml"), "--shards", "2"])
    env = {**cluster.env, "RAY_ADDRESS": cluster.address}
    proc = subprocess.run([sys.executable, "-m", "cluster.cli", *args, "--backend", "ray", "--quiet", "--json"],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _jobs(cluster) == before + 1  # its driver is a job of this cluster


def test_a_wrong_ray_address_is_a_clear_error_not_a_silent_local_run(tmp_path):
    env = {**os.environ, "RAY_ADDRESS": f"127.0.0.1:{_free_port()}"}
    proc = subprocess.run([sys.executable, "-m", "cluster.cli", "noc", "--k", "4", "--rates", "0.1,0.2",
                           "--backend", "ray", "--quiet"], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "RAY_ADDRESS" in line and env["RAY_ADDRESS"] in line


@pytest.mark.parametrize("client, token", [(False, None), (False, "0" * 64), (True, None)])
def test_a_driver_without_the_clusters_token_says_token_at_once_and_records_no_run(cluster, client, token, tmp_path):
    """The cluster enforces a token (RAY_AUTH_MODE=token on every node): a driver with none (its own
    HOME: no ~/.ray/auth_token either), or with another, is one line naming the token and what to
    set, in seconds (ray.init alone retries for 20 s, then says only "Failed to connect", or
    "ray client connection timeout" after 30 s through the Ray Client port), and the run never
    started: no manifest (the sweep's record of runs) is written."""
    spec = _spec(tmp_path / "t.toml", NOC)
    address = f"ray://127.0.0.1:{cluster.client_port}" if client else cluster.address
    env = {k: v for k, v in cluster.env.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    env["HOME"] = str(tmp_path / "home")
    if token:
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    started = time.monotonic()
    proc = cluster.sweep(spec, tmp_path / "out", address=address, env=env)
    assert proc.returncode == 2, proc.stderr_text[-3000:]
    assert time.monotonic() - started < 15
    (line,) = proc.stderr_text.strip().splitlines()
    assert "token" in line and "RAY_AUTH_TOKEN" in line and address in line
    assert ("refused this client's token" in line) if token else ("set RAY_AUTH_MODE=token" in line)
    assert not list((tmp_path / "out").rglob("*manifest*"))


def test_killing_the_driver_and_rerunning_resumes_without_recomputing(cluster, tmp_path):
    spec = _spec(tmp_path / "d.toml", SLOW.format(name="d", sleep=0.4, values=list(range(24))))
    out = tmp_path / "out"
    proc = cluster.sweep(spec, out, wait=False)
    _wait_for_files(out / "d", 6, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in (out / "d").rglob("*.parquet")}
    assert 6 <= len(before) < 24
    again = cluster.sweep(spec, out)
    assert again.returncode == 0, again.stderr_text
    rows = _exactly_once(out, "d", spec)
    assert all(r["point_status"] == "ok" for r in rows)
    assert {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in before} == before  # untouched
    last = json.loads((out / "_d.manifest.json").read_text())["runs"][-1]
    assert (last["skipped"], last["computed"], last["state"]) == (len(before), 24 - len(before), "finished")


def _running_on(node: str, started: Path, dataset: Path, proc, timeout: float = 120) -> str:
    """Wait until a point has started on ``node`` and is not stored yet; return its noop.value."""
    end = time.monotonic() + timeout
    while True:
        stored = {pq.read_table(f, columns=["noop_value"])["noop_value"][0].as_py()
                  for f in dataset.rglob("*.parquet")}
        for marker in started.glob("[0-9]*"):  # not the writer's temporary files
            if marker.read_text() == node and float(marker.name) not in stored:
                return marker.name
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < end, "no point ran on the second node"
        time.sleep(0.05)


def test_killing_the_worker_node_mid_sweep_still_stores_every_point_once(cluster, tmp_path):
    started = tmp_path / "started"
    started.mkdir()
    spec = _spec(tmp_path / "w.toml", SLOW.format(name="w", sleep=1.5, values=list(range(15)))
                 .replace("[axes]", f'noop.started_dir = "{started}"\n[axes]'))  # in [base]
    out = tmp_path / "out"
    proc = cluster.sweep(spec, out, wait=False)
    victim = _running_on(cluster.worker_node_id(), started, out / "w", proc)
    cluster.kill_worker()
    killed_at = time.time()
    _, err = proc.communicate(timeout=180)
    cluster.start_worker()  # leave a two-node cluster behind
    assert proc.returncode == 0, err
    rows = {r["noop_value"]: r for r in _exactly_once(out, "w", spec)}
    assert all(r["point_status"] == "ok" for r in rows.values())
    assert rows[float(victim)]["point_attempts"] >= 2  # it was running on the node that died: it ran again
    nodes_after = {r["point_node"] for r in rows.values() if _stored_at(out / "w", r) > killed_at + 0.5}
    assert len(nodes_after) == 1  # after the kill, only the head was left


def _stored_at(dataset: Path, row: dict) -> float:
    return next(dataset.rglob(f"{row['point_id']}.*.parquet")).stat().st_mtime

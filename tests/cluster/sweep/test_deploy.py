"""deploy/: the `ray up` YAML passes Ray's own config validation, the KubeRay manifests and
the Dockerfile agree with each other and with the package, and token auth is on everywhere."""

import re
import shlex
import subprocess
import tomllib

import pytest
import yaml

from cluster.sweep.plan import plan_sweep
from tests.paths import ROOT

DEPLOY = ROOT / "deploy"
RAY_RANGE = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
                 if d.startswith("ray"))
RAY_PIN = re.search(r"^FROM\s+rayproject/ray:(\d+\.\d+\.\d+)", (DEPLOY / "Dockerfile").read_text(), re.M).group(1)
IMAGE_HOME = "/home/ray/rdasim/"


def _manifest(name):
    return yaml.safe_load((DEPLOY / "kuberay" / name).read_text())


MANUAL = "manual-token/"  # the same manifests for KubeRay < 1.5.1: the token from a Secret you create


def _image():
    return yaml.safe_load((DEPLOY / "ray-cluster.yaml").read_text())["docker"]["image"]


def test_the_ray_range_is_the_one_checked_at_run_time_and_the_image_is_inside_it():
    from cluster.parallel.ray_env import SUPPORTED_RAY, ray_version_problem

    (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED_RAY
    assert RAY_RANGE == f"ray>={lo_major}.{lo_minor},<{hi_major}.{hi_minor}"
    assert ray_version_problem(RAY_PIN) is None  # the image's Ray
    assert "tested with Ray >= 2.59, < 2.61" in ray_version_problem("2.58.1")
    assert ray_version_problem("2.61.0") is not None and ray_version_problem("3.0.0") is not None


def test_ray_up_config_passes_rays_validation():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((DEPLOY / "ray-cluster.yaml").read_text())
    validate_config(prepare_config(config))  # raises on any schema or consistency error


def test_ray_up_nodes_all_start_with_token_auth_and_the_same_token():
    config = yaml.safe_load((DEPLOY / "ray-cluster.yaml").read_text())
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in config[key] if "ray start" in c]
        assert start and all("RAY_AUTH_MODE=token" in c for c in start), key
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    assert "--env RAY_AUTH_MODE=token" in config["docker"]["run_options"]


def _ray_containers(spec):
    yield from spec["headGroupSpec"]["template"]["spec"]["containers"]
    for group in spec["workerGroupSpecs"]:
        yield from group["template"]["spec"]["containers"]


def _env(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def _check_cluster_spec(spec, manual: bool):
    assert spec["rayVersion"] == RAY_PIN
    containers = list(_ray_containers(spec))
    assert len(containers) >= 2
    for c in containers:
        env = _env(c)
        if manual:
            assert env["RAY_AUTH_MODE"] == "token"
            assert env["RAY_AUTH_TOKEN"] == {"secretKeyRef": {"name": "rdasim-ray-token", "key": "auth_token"}}
        else:  # KubeRay sets both on every Ray container from the Secret it generates
            assert spec["authOptions"] == {"mode": "token"} and "RAY_AUTH_MODE" not in env
        assert c["image"] == _image()
    head = spec["headGroupSpec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in head["containers"][0]["volumeMounts"]}
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in head["volumes"]}
    assert claims[next(iter(mounts))] == _manifest("results-pvc.yaml")["metadata"]["name"]
    return mounts


@pytest.mark.parametrize("manual", [False, True])
def test_kuberay_raycluster_runs_rdasim_with_token_auth_on_every_node(manual):
    m = _manifest(MANUAL * manual + "raycluster.yaml")
    assert (m["apiVersion"], m["kind"]) == ("ray.io/v1", "RayCluster")
    _check_cluster_spec(m["spec"], manual)


def _entrypoint_script(m) -> str:
    argv = shlex.split(m["spec"]["entrypoint"])
    assert argv[:2] == ["bash", "-c"] and len(argv) == 3
    return argv[2]


@pytest.mark.parametrize("manual", [False, True])
def test_kuberay_rayjob_runs_a_valid_sweep_into_the_results_volume(manual):
    m = _manifest(MANUAL * manual + "rayjob.yaml")
    assert (m["apiVersion"], m["kind"]) == ("ray.io/v1", "RayJob")
    mounts = _check_cluster_spec(m["spec"]["rayClusterSpec"], manual)
    if manual:
        submitter = m["spec"]["submitterPodTemplate"]["spec"]["containers"][0]
        assert _env(submitter)["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" in _env(submitter)
    argv = shlex.split(_entrypoint_script(m).split(";")[0])
    assert argv[:2] == ["rdasim", "sweep"] and "--address" not in argv  # Ray Jobs set RAY_ADDRESS
    assert argv[argv.index("--out") + 1].startswith(next(iter(mounts.values())))
    spec = argv[2]
    assert spec.startswith(IMAGE_HOME)
    assert len(plan_sweep(ROOT / spec[len(IMAGE_HOME):]).points) > 0  # the spec in the image is valid


@pytest.mark.parametrize("manual", [False, True])
def test_the_rayjob_retries_only_a_failed_driver(manual):
    """backoffLimit > 0 (a retry resumes, recomputing nothing); the entrypoint ends the RayJob on
    a bad spec (2) or error rows (3), which a retry cannot fix, and passes a driver failure on."""
    m = _manifest(MANUAL * manual + "rayjob.yaml")
    assert m["spec"]["backoffLimit"] > 0
    script = _entrypoint_script(m)
    for status, job in ((0, 0), (1, 1), (2, 0), (3, 0), (130, 130)):
        run = subprocess.run(["bash", "-c", f"rdasim() {{ return {status}; }}; {script}"], capture_output=True,
                             text=True, timeout=30)
        assert run.returncode == job, (status, run.stdout, run.stderr)
        assert ("not retried" in run.stdout) == (status in (2, 3))


def test_dockerfile_builds_the_pinned_ray_with_every_package():
    text = (DEPLOY / "Dockerfile").read_text()
    base = re.search(r"^FROM\s+(\S+)", text, re.M).group(1)
    assert base == f"rayproject/ray:{RAY_PIN}-py311"  # same Ray as the driver, Python 3.11
    copied = re.findall(r"^COPY\s+(?:--\S+\s+)*(.+?)\s+\S+$", text, re.M)
    sources = {s for line in copied for s in line.split()}
    for src in sources:
        assert (ROOT / src).exists(), src
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert {p.rstrip("*") for p in packages["include"]} | {"examples"} <= sources
    assert re.search(r'pip install [^\n]*"\.\[report\]"', text)
    assert f"ray.__version__ == '{RAY_PIN}'" in text
    assert "YOUR_ORG/rdasim:" in _image() and _image().split(":")[-1] in text


def test_deploy_readme_covers_every_route_and_token_auth():
    text = (DEPLOY / "README.md").read_text()
    for needle in ("ray up deploy/ray-cluster.yaml", "kubectl apply -f deploy/kuberay/raycluster.yaml",
                   "deploy/kuberay/rayjob.yaml", "ray job submit", "RAY_AUTH_MODE=token", "ray start --head",
                   "docker build -f deploy/Dockerfile", "rdasim sweep status"):
        assert needle in text, needle


def test_sweep_docs_describe_every_sweep_column_and_spec_key():
    from cluster.results import schemas
    from cluster.sweep.spec import SWEEP_SECTION

    text = (ROOT / "docs" / "sweeps.md").read_text()
    for column in schemas.SWEEP_COLUMNS:
        assert f"| `{column.name}` | {column.type} |".replace("double", "float64") in text, column.name
    for key in SWEEP_SECTION.fields:
        assert f"\n{key} = " in text, key

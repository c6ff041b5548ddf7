"""Starting or joining Ray the way rdasim needs it, on a fresh machine or a cluster.

Which Ray: ``--address``/``run.address`` if given, else ``RAY_ADDRESS`` (which ``ray job
submit`` sets for its driver, so a sweep submitted as a Ray job runs on the whole
cluster, not on an embedded Ray beside it), else an embedded local Ray. The installed
Ray must be in the range rdasim is tested with (``SUPPORTED_RAY``), and a cluster's Ray
must equal the driver's (Ray itself refuses otherwise; the error says which is which).

Ray 2.60 turns token authentication on for local instances and generates the token
itself (``~/.ray/auth_token``); clusters started with ``ray start`` use a token only if
``RAY_AUTH_MODE=token`` is set on every node, and then every client needs the same
token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``); before joining,
one call asks the cluster whether it accepts this client's token, so a refusal is one line
naming the token and what to set, not Ray's "Failed to connect" after 20 s. Usage
statistics are switched off so nothing prompts or phones home. Only ``cluster/``
imports Ray, and only through here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from pathlib import Path

from cluster.errors import UserError

SUPPORTED_RAY = ((2, 59), (2, 61))  # [low, high): the versions the test suite ran with (pyproject.toml agrees)


def ray_version_problem(version: str) -> str | None:
    """Why this Ray version is outside the tested range, or None."""
    try:
        got = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        return f"cannot read Ray's version {version!r}"
    lo, hi = SUPPORTED_RAY
    if lo <= got < hi:
        return None
    return (f"Ray {version} is installed; rdasim is tested with Ray >= {lo[0]}.{lo[1]}, < {hi[0]}.{hi[1]} "
            f"(pip install 'ray[default]>={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}')")


def actor_cpus(cluster_cpus: float, shards: int) -> float:
    """CPUs of each shard actor: every shard must run at the same time, so at most an equal share
    of the cluster (and at most 1). The one place this is decided: a sweep reserves bundles of
    this size and the Ray backend, running inside them, takes the size from its placement group."""
    return max(min(1.0, cluster_cpus / shards), 0.01)


def token_available() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return Path(path).is_file()
    return (Path.home() / ".ray" / "auth_token").is_file()


def init_ray(address: str | None = None, num_cpus: int | None = None):
    """Join the cluster at ``address`` ("auto", "ray://host:10001", "host:6379"), else the one in
    ``RAY_ADDRESS``, else start an embedded local Ray. Returns the ray module."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Ray renices its workers to 15 so that a driver stays responsive; rdasim's driver only
    # waits while its shard actors do the work, and a niced actor competing with un-niced
    # processes for a core gets a sliver of it (CFS weight 36 against 1,024). An embedded Ray's
    # workers inherit this; a cluster's nodes take it from their own environment
    # (deploy/README.md).
    os.environ.setdefault("RAY_worker_niceness", "0")
    import ray

    if ray.is_initialized():
        return ray
    with _keeping_signal_handlers():
        return _init(ray, address, num_cpus)


@contextlib.contextmanager
def _keeping_signal_handlers():
    """Keep this process's SIGTERM and SIGINT handlers across ``ray.init``, which installs its own in a driver
    (SIGTERM: ``sys.exit(15)`` through Ray's stack, exit 1 or 15): a command's own (exit 143, the run marked
    interrupted) stay in force."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            if handler is not None:
                signal.signal(sig, handler)


def _init(ray, address: str | None, num_cpus: int | None):
    problem = ray_version_problem(ray.__version__)
    if problem:
        raise UserError(problem)
    where = "--address"
    if not address and os.environ.get("RAY_ADDRESS"):
        address, where = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    if address:
        if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" and not token_available():
            raise UserError(
                f"RAY_AUTH_MODE=token but no token for the cluster at {address}: set RAY_AUTH_TOKEN, "
                "RAY_AUTH_TOKEN_PATH, or copy the head node's ~/.ray/auth_token (`ray get-auth-token`)"
            )
        unreachable = _unreachable(address) or _token_refused(address)
        if unreachable:  # Ray itself would retry for 20 s or minutes, then say only "Failed to connect"
            raise UserError(f"cannot connect to the Ray cluster at {address!r} (from {where}): {unreachable}")
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            hint = ""
            text = str(exc).lower()
            if "auth" in text or "token" in text or "unauthenticated" in text:
                hint = " (token authentication: set RAY_AUTH_MODE=token and the cluster's token)"
            elif "version" in text:
                hint = f" (this driver has Ray {ray.__version__}: install the cluster's Ray version here)"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"cannot connect to the Ray cluster at {address!r} (from {where}): {first}{hint}") from None
    else:
        ray.init(address="local", num_cpus=num_cpus, logging_level=logging.ERROR, log_to_driver=True,
                 include_dashboard=False)
    return ray


def _unreachable(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing listens at a "host:port" or "ray://host:port" address (None: it answers, or
    the address is "auto" or another form Ray resolves itself)."""
    target = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        return f"nothing answers at {host}:{port} ({(exc.strerror or str(exc)).lower()})"
    return None


def _token_refused(address: str, timeout: float = 5.0) -> str | None:
    """Why the cluster at a "host:port" (its GCS) or "ray://host:port" (its Ray Client server)
    address refuses this client's token (None: it accepts it, the address is another form, or
    what answers does not say). One call with the token Ray's own clients would send (none
    unless RAY_AUTH_MODE=token): a cluster enforcing a token answers UNAUTHENTICATED at once,
    where ``ray.init`` retries for 20 s or more and then says only "Failed to connect"."""
    client = address.startswith("ray://")
    host, sep, port = (address[len("ray://"):] if client else address).rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    import grpc
    from ray._private.authentication.grpc_authentication_client_interceptor import (
        SyncAuthenticationMetadataClientInterceptor,
    )
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc, ray_client_pb2, ray_client_pb2_grpc

    channel = grpc.intercept_channel(grpc.insecure_channel(f"{host.strip('[]')}:{port}"),
                                     SyncAuthenticationMetadataClientInterceptor())
    try:
        if client:  # (protobuf modules: no type stubs)
            ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)  # type: ignore[attr-defined]
            ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(ping, timeout=timeout)
        else:
            ask = gcs_service_pb2.GetClusterIdRequest()  # type: ignore[attr-defined]
            gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(ask, timeout=timeout)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
            return token_problem(exc.details() or "", os.environ.get("RAY_AUTH_MODE", "").lower() == "token")
    finally:
        channel.close()
    return None


def token_problem(said: str, token_mode: bool) -> str:
    """One line for a cluster that refused this client's token: what it said and what to set."""
    where = "RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token (`ray get-auth-token` on the head prints it)"
    if token_mode:
        return f"the cluster refused this client's token ({said}): give it the cluster's token in {where}"
    return (f"the cluster requires a token ({said}): set RAY_AUTH_MODE=token and the cluster's token in {where}")


def cluster_cpus() -> float:
    import ray

    return float(ray.cluster_resources().get("CPU", 1.0))

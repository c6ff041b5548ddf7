"""Starting or joining Ray the way rdasim needs it, on a fresh machine or a cluster.

Ray 2.60 turns token authentication on for local instances and generates the token
itself (``~/.ray/auth_token``); clusters started with ``ray start`` use a token only if
``RAY_AUTH_MODE=token`` is set on every node, and then every client needs the same
token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``). Usage
statistics are switched off so nothing prompts or phones home. Only ``cluster/``
imports Ray, and only through here.
"""

from __future__ import annotations

import os
from pathlib import Path

from cluster.errors import UserError


def token_available() -> bool:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return Path(path).is_file()
    return (Path.home() / ".ray" / "auth_token").is_file()


def init_ray(address: str | None = None, num_cpus: int | None = None):
    """Join the cluster at ``address`` ("auto", "ray://host:10001", "host:6379") or start an
    embedded local Ray. Returns the ray module."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray

    if ray.is_initialized():
        return ray
    kwargs = dict(logging_level="ERROR", log_to_driver=True, include_dashboard=False)
    if address:
        if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" and not token_available():
            raise UserError(
                f"RAY_AUTH_MODE=token but no token for the cluster at {address}: set RAY_AUTH_TOKEN, "
                "RAY_AUTH_TOKEN_PATH, or copy the head node's ~/.ray/auth_token (`ray get-auth-token`)"
            )
        kwargs.pop("include_dashboard")
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            hint = ""
            text = str(exc).lower()
            if "auth" in text or "token" in text or "unauthenticated" in text:
                hint = " (token authentication: set RAY_AUTH_MODE=token and the cluster's token)"
            raise UserError(f"cannot connect to the Ray cluster at {address!r}: {exc}{hint}") from None
    else:
        ray.init(address="local", num_cpus=num_cpus, **kwargs)
    return ray


def cluster_cpus() -> float:
    import ray

    return float(ray.cluster_resources().get("CPU", 1.0))

"""Shared test set-up: keep Ray quiet and make hypothesis deterministic-ish on CI."""

import os

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

try:
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("ci")
except ImportError:  # pragma: no cover
    pass


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def ray_session():
    """One embedded Ray for the whole test session (starting Ray costs seconds)."""
    from cluster.parallel.ray_env import init_ray

    ray = init_ray(num_cpus=2)
    yield ray
    ray.shutdown()

"""examples/kv_decode_pressure.toml, the over-committed trace, as its comments say: under
``stall`` the running sequences' KV outgrows the MUs before any could finish and the run
deadlocks; under ``preempt`` (memory-aware admission, preemption when a sequence cannot grow)
every request is served and the shadow oracle finds nothing. The trace's first 24 requests
keep it fast; the shape is the same (the full minute deadlocks the same way with 7 served)."""

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, chip_config
from cluster.jobs.chip import simulate_chip
from tests.paths import ROOT

CONFIG = ROOT / "examples" / "kv_decode_pressure.toml"
FIRST = "workload.decode.requests=24"


def summary(*sets: str) -> dict:
    return simulate_chip(chip_config(load(RUN_SCHEMA, CONFIG, [FIRST, *sets]))).summary


def test_the_pressure_config_as_shipped_deadlocks():
    s = summary()
    assert s["status"] == "deadlocked" and s["stalled_at_end"] > 0
    assert s["requests_finished"] < s["trace_requests"] == 24
    # the KV wanted is more than the chip holds: an MU filled while most of the chip was free
    assert 0 < s["first_oom_utilization"] < 0.9


def test_preemption_serves_every_request_with_the_oracle_clean():
    s = summary("memory.on_oom='preempt'")
    assert s["status"] == "completed" and s["requests_finished"] == 24 and s["requests_failed"] == 0
    assert s["use_after_free"] == s["double_free"] == s["premature_free"] == s["leaks"] == 0
    assert s["live_at_end"] == 0

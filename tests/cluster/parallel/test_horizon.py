"""run.max_cycles is where a run stops: every event before it is simulated and
none after, whatever the shard count, the windows or the backend. Skip-ahead windows once jumped
an idle stretch to the next event past the limit and simulated an epoch there (29.5 M cycles
against 20 M on a trace run)."""

import pytest

from tests.sim.chip.chiprun import run

LIMIT = 400_000  # cycles; the 1 GHz chip's trace arrivals below are at 0, 100,000 and 1,000,000


def _trace(tmp_path) -> str:
    """Three requests 0.1 ms and 1 ms after the first: at cycles 0, 100,000 and 1,000,000 on a
    1 GHz chip with no speed-up; each is short (16 prompt tokens, 2 generated)."""
    path = tmp_path / "three.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-14 22:13:20.0000000,16,2\n"
                    "2023-11-14 22:13:20.0001000,16,2\n"
                    "2023-11-14 22:13:20.0010000,16,2\n")
    return str(path)


def _raw(tmp_path) -> dict:
    return {"workload": {"kind": "kv-decode", "decode": {
        "trace": _trace(tmp_path), "trace_speedup": 1.0, "requests": 0, "max_batch": 2, "layers": 1, "heads": 1,
        "head_dim": 16}}, "run": {"max_cycles": LIMIT}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("horizon")
    return {n: run(_raw(tmp), shards=n) for n in (1, 2)}


@pytest.mark.parametrize("shards", [1, 2])
def test_a_cut_off_run_stops_at_max_cycles(runs, shards):
    s = runs[shards].summary
    # by hand: the first two requests arrive (cycles 0 and 100,000) and finish long before the
    # limit; the third arrives at 1,000,000, past it, so the chip idles from the second's end to
    # the limit and the run is cut off there, not at the third's arrival
    assert (s["status"], s["cut_off"], s["completed"]) == ("cut_off", True, False)
    assert s["sim_cycles"] == LIMIT  # simulated: exactly [0, max_cycles)
    assert s["requests"] == 2 and s["requests_failed"] == 0 and s["tokens"] == 4
    reports = runs[shards].simulation.outcome.reports
    last = max(r.end_cycle for r in reports)
    assert 100_000 < last < LIMIT  # the second request's last event, before the limit
    assert s["status_detail"] == (f"cut off at run.max_cycles = {LIMIT:,} cycles: every event before it was "
                                  f"simulated (the last at cycle {last:,}), none after")
    assert s["tokens_per_second"] == pytest.approx(4 / (LIMIT / 1e9))  # over the cycles simulated


def test_one_and_two_shards_stop_at_the_same_cycle(runs):
    one, two = runs[1], runs[2]
    assert two.simulation.shards == 2 and two.simulation.outcome.epochs > one.simulation.outcome.epochs
    assert one.summary["result_hash"] == two.summary["result_hash"]
    assert one.summary["sim_cycles"] == two.summary["sim_cycles"]
    # each stopped once nothing was left before the limit: no window reached past it
    assert max(one.simulation.outcome.end_cycle, two.simulation.outcome.end_cycle) <= LIMIT


@pytest.mark.ray
def test_ray_stops_at_the_same_cycle(ray_session, runs, tmp_path):
    on_ray = run(_raw(tmp_path), shards=2, backend="ray")
    assert on_ray.simulation.backend == "ray" and on_ray.summary["sim_cycles"] == LIMIT
    assert on_ray.summary["result_hash"] == runs[1].summary["result_hash"]

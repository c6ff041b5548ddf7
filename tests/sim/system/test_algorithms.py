"""Collective algorithms simulated as messages against their alpha-beta closed forms, and the
choice by size: latency-optimal for a decode step's few KiB, bandwidth-optimal for prefill's MiBs."""

import math

import pytest

from cluster.config import ConfigError, load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.system import simulate_system
from mapping.systems import LinkKind
from sim.system.algorithms import PortTiming, choose, closed_form

CLOCK = 1.25e9  # SN30's: the cycle of these systems
BW, LAT = 100e9, 500e-9


def _run(kind: str, p: int, op: str, nbytes: int, algorithm: str = "auto") -> dict:
    dims = [{"kind": kind, "size": p, "link_bandwidth": "100GB/s", "link_latency": "500ns", "parallelism": "TP"}]
    raw = {"system": {"chips": p, "chip": "SN30", "network": dims},
           "workload": {"kind": "collective", "collective": {"op": op, "nbytes": nbytes, "algorithm": algorithm}}}
    return simulate_system(system_config(load(RUN_SCHEMA, raw=raw))).summary


def _alpha_beta(op: str, algorithm: str, p: int, nbytes: int) -> float:
    """The textbook form in cycles: alpha the link's latency, beta its seconds a byte (no rounding)."""
    return closed_form(op, algorithm, p, nbytes, LAT * CLOCK, lambda b: b / BW * CLOCK)


CASES = [(op, alg) for op in ("all_reduce", "all_gather", "reduce_scatter")
         for alg in ("ring", "direct", "one-shot", "recursive-doubling")
         if not (alg == "one-shot" and op != "all_reduce")]


@pytest.mark.parametrize("op,algorithm", CASES)
@pytest.mark.parametrize("p,nbytes", [(8, 8 << 10), (16, 8 << 10), (8, 4 << 20)])
def test_each_algorithm_within_5pct_of_its_alpha_beta_form(op, algorithm, p, nbytes):
    s = _run("fc", p, op, nbytes, algorithm)
    assert s["algorithm"] == algorithm
    simulated = s["collective_cycles"][0]
    assert simulated == pytest.approx(_alpha_beta(op, algorithm, p, nbytes), rel=0.05)


def test_one_shot_all_reduce_is_one_latency_and_the_senders_port():
    p, nbytes = 8, 8 << 10
    s = _run("fc", p, "all_reduce", nbytes, "one-shot")
    bpc = BW / CLOCK
    assert s["collective_cycles"] == [round(LAT * CLOCK) + (p - 1) * math.ceil(nbytes / bpc)]


@pytest.mark.parametrize("p", [8, 16])
def test_the_choice_flips_from_latency_to_bandwidth_optimal_where_the_forms_cross(p):
    """One-shot against direct: alpha + (p-1) S beta = 2 alpha + 2 (p-1) S beta / p crosses at
    S = alpha p / ((p-1)(p-2) beta); recursive doubling is never better than both here."""
    alpha, beta = LAT, 1 / BW
    cross = alpha * p / ((p - 1) * (p - 2) * beta)
    ser = lambda b: b * beta  # noqa: E731
    assert choose("all_reduce", LinkKind.FULLY_CONNECTED, p, 0.9 * cross, alpha, ser) == "one-shot"
    assert choose("all_reduce", LinkKind.FULLY_CONNECTED, p, 1.1 * cross, alpha, ser) == "direct"
    assert choose("all_reduce", LinkKind.FULLY_CONNECTED, p, 64 << 20, alpha, ser) == "direct"
    assert choose("all_reduce", LinkKind.RING, p, 1024, alpha, ser) == "ring"  # neighbours only


@pytest.mark.parametrize("nbytes", [1 << 10, 8 << 10, 256 << 10, 4 << 20])
def test_auto_simulates_no_slower_than_any_other_algorithm(nbytes):
    p = 8
    auto = _run("fc", p, "all_reduce", nbytes)
    others = [_run("fc", p, "all_reduce", nbytes, a)["collective_cycles"][0]
              for a in ("ring", "direct", "one-shot", "recursive-doubling")]
    assert auto["collective_cycles"][0] <= 1.02 * min(others)


def test_a_ring_network_keeps_the_ring_and_its_exact_form():
    p, nbytes = 8, 8 << 10
    s = _run("r", p, "all_reduce", nbytes)
    port = PortTiming.of(LinkKind.RING, BW, LAT, CLOCK, 4096)
    assert s["algorithm"] == "ring"
    assert s["collective_cycles"] == [port.cycles("all_reduce", "ring", p, nbytes)] == [s["closed_form_cycles"]]


def test_an_algorithm_the_network_cannot_run_is_named():
    with pytest.raises(ConfigError, match="recursive-doubling.*all_reduce over 6 chips"):
        _run("fc", 6, "all_reduce", 1024, "recursive-doubling")
    with pytest.raises(ConfigError, match="one-shot.*ring dimension"):
        _run("r", 4, "all_reduce", 1024, "one-shot")

"""The command line refuses nonsense and absurd sizes in one line, keeps an interrupted curve,
tells the truth in its progress lines, and says what it is (--version, help for every flag)."""

import argparse
import io
import json
import re
import signal
import subprocess
import sys
import time

import pytest

from cluster.cli import build_parser, main
from cluster.progress import Progress
from cluster.results.reading import read_table
from tests.paths import ROOT


def _one_line_error(capsys, argv, *words):
    start = time.perf_counter()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) <= 2, err
    for w in words:
        assert w in err, err
    assert time.perf_counter() - start < 10  # refused before any work
    return err


@pytest.mark.parametrize("argv,words", [
    (["noc", "--rates", ""], ["--rates", "at least one offered load"]),
    (["noc", "--rate", "0"], ["noc.rate", "no traffic"]),
    (["noc", "--rates", "0.1,0"], ["noc.rates[1]", "no traffic"]),
    (["noc", "--set", "noc.rates=[]"], ["noc.rates", "is empty"]),
])
def test_nonsense_noc_loads_are_refused(capsys, argv, words):
    _one_line_error(capsys, argv, *words)


def test_a_mapping_onto_more_chips_than_the_model_has_columns_is_refused_or_explained(capsys):
    toml = str(ROOT / "examples" / "map_llm_sn40l.toml")
    _one_line_error(capsys, ["map", toml, "--set", "system.chips=1000000000"], "system.chips = 1,000,000,000",
                    "at most 671,088,640")
    assert main(["map", toml, "--set", "system.chips=100000000", "--quiet", "--json"]) == 7
    err = capsys.readouterr().err
    assert "TP = 1,250,000 splits workload.llm.hidden = 8,192" in err


@pytest.mark.parametrize("argv,key", [
    (["noc", "--k", "1000", "--rate", "0.1"], "noc.k: 1000: this simulation would need about 3.6 TiB"),
    (["run", str(ROOT / "examples" / "race.toml"), "--set", "chip.rows=10000", "--set", "chip.cols=10000"],
     "chip.rows x chip.cols: 10000 x 10000"),
    (["run", str(ROOT / "examples" / "kv_decode.toml"), "--set", "chip.mu_bytes=1TiB"],
     "chip.mu_bytes: 1,099,511,627,776 bytes"),
])
def test_absurd_sizes_are_refused_with_the_key_and_the_estimate(capsys, argv, key):
    err = _one_line_error(capsys, argv, key, "of memory per shard", "this machine has")
    assert "Unable to allocate" not in err


def test_a_buffer_size_beyond_64_bits_is_a_one_line_error(tmp_path, capsys):
    src = tmp_path / "big.csv"
    src.write_text("id,lower,upper,size\na,0,2,1000000000000000000000000000000\n")
    _one_line_error(capsys, ["alloc", "plan", str(src), "--method", "greedy"], "a", "64")


def test_ctrl_c_on_a_curve_keeps_and_writes_the_loads_that_finished(tmp_path):
    """Each load long enough (2 M cycles: seconds each) that the Ctrl-C sent on the first's "done" lands in
    the next ones; with 3,000 cycles an idle machine finished the whole curve before the signal arrived.
    The child takes SIGINT as a terminal's Ctrl-C does (a suite started in the background, ``cmd &`` in a
    script, passes SIGINT on ignored, and Python then never raises KeyboardInterrupt)."""
    out = tmp_path / "out"
    as_at_a_terminal = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                        "from cluster.cli import console; console()")  # what `rdasim` and `python -m cluster.cli` run
    proc = subprocess.Popen([sys.executable, "-c", as_at_a_terminal, "noc", "--k", "4", "--rates", "0.1,0.2,0.3,0.4",
                             "--set", "noc.warmup_cycles=500", "--set", "noc.measure_cycles=2000000", "--out",
                             str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    err = ""
    for line in proc.stderr:  # the first load's "done" line, then Ctrl-C during the next ones
        err += line
        if "noc rate 0.1: done" in line:
            break
    proc.send_signal(signal.SIGINT)
    rest_out, rest_err = proc.communicate(timeout=120)
    err += rest_err
    assert proc.returncode == 130, err
    rows = read_table(out, "noc_summary").to_pylist()
    record = json.loads((out / "run.json").read_text())
    done, missing = [r["rate"] for r in rows], record["summary"]["missing_rates"]
    assert done[0] == 0.1 and sorted(done + missing) == [0.1, 0.2, 0.3, 0.4]
    assert record["status"] == "interrupted" and missing and [r["rate"] for r in record["summary"]["loads"]] == done
    assert f"missing rates {', '.join(f'{r:g}' for r in missing)}" in err
    assert not list(out.glob(".*.tmp"))


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_in_a_log_is_a_line_every_few_seconds_with_an_honest_eta():
    """1,142 lines for one sweep before; then a line every 30 s, too few to follow; now a 10-minute job
    at a steady rate logs a line every 5 s, each ETA near the truth."""
    clock, log = _Clock(), io.StringIO()
    p = Progress("sweep", stream=log, clock=clock)
    for i in range(1, 6001):  # 6,000 points in 600 s, updated every 0.1 s
        clock.t = i * 0.1
        p(i, 6000, unit="points")
    lines = log.getvalue().splitlines()
    assert 100 <= len(lines) <= 121
    for line in lines:
        done = int(line.split(": ")[1].split("/")[0].replace(",", ""))
        left = re.search(r"about (\d+(?:\.\d+)?) (s|min) left", line)
        truth = (6000 - done) / 10
        if done < 0.02 * 6000:  # no estimate before 2 % of the work: no basis yet
            assert not left
            continue
        shown = float(left.group(1)) * (60 if left.group(2) == "min" else 1) if left else None
        assert shown is not None and abs(shown - truth) <= max(60, 0.1 * truth)
    assert not re.search(r"\bnan\b|[ (]0/s", log.getvalue())


def test_progress_against_a_bound_shows_no_eta_and_no_start_up_distortion():
    clock, log = _Clock(), io.StringIO()
    p = Progress("run", stream=log, clock=clock, bound=True, every=1.0)
    clock.t = 5.0  # five seconds of start-up (Ray, imports) before the first cycle
    p(0, 20_000_000)
    for i in range(1, 40):
        clock.t = 5.0 + i * 0.5
        p(i * 50_000, 20_000_000)
    text = log.getvalue()
    assert "left" not in text and "ETA" not in text and not re.search(r"\bnan\b", text)
    assert text.strip().splitlines()[-1].endswith("cycles (run stops by 20,000,000), 100,000/s")


def test_rdasim_run_logs_no_eta_against_max_cycles(tmp_path):
    small = ["--set", "workload.decode.requests=8", "--set", "workload.decode.output_tokens.max=16",
             "--set", "workload.decode.output_tokens.min=8"]
    kv_decode = str(ROOT / "examples" / "kv_decode.toml")
    got = subprocess.run([sys.executable, "-m", "cluster.cli", "run", kv_decode, *small],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert got.returncode == 0
    assert "ETA" not in got.stderr and "left" not in got.stderr and not re.search(r"\bnan\b", got.stderr)
    assert len(got.stderr.splitlines()) <= 3


def test_version_and_help_for_every_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert re.match(r"rdasim \d+\.\d+\.\d+", capsys.readouterr().out)

    def options(parser, name):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, sp in a.choices.items():
                    yield from options(sp, f"{name} {sub}")
            elif a.dest != "help":
                yield name, a

    missing = [(name, a.option_strings or a.dest) for name, a in options(build_parser(), "rdasim") if not a.help]
    assert not missing
    sets = {name: a.metavar for name, a in options(build_parser(), "rdasim") if "--set" in a.option_strings}
    assert set(sets) == {"rdasim noc", "rdasim run", "rdasim map"} and set(sets.values()) == {"KEY.PATH=VALUE"}
    outs = {name: a.metavar for name, a in options(build_parser(), "rdasim") if "--out" in a.option_strings}
    assert {m for n, m in outs.items() if n != "rdasim alloc plan"} == {"DIR"}

"""The STeP artifact's routing files as published (issue 27 item 6): ``workload.moe.trace`` reads
``ITERATION_LAYER.npz`` (one array ``data`` of [tokens, top_k]) and their folder directly; a
``data`` file under another name is an error naming the converter; a refusal's advice is a change
that works (each is applied and run, and one token more than advised is refused again)."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from cluster.cli import main
from sim.serving.trace import TraceError
from sim.workloads.routing_trace import read_routing
from tests.paths import EXAMPLES, ROOT

STEP = ROOT / "benchmarks" / "data" / "step" / "dyn_tiling" / "expert_routing"  # the artifact's, as published
B64 = STEP / "mixtral_b64" / "008_010.npz"
B1024 = STEP / "mixtral_b1024" / "019_009.npz"


def _config(tmp_path, trace) -> str:
    text = (EXAMPLES / "moe_trace.toml").read_text()
    cfg = tmp_path / "moe_step.toml"
    cfg.write_text(re.sub(r'(?m)^trace = ".*"', f'trace = "{trace}"', text))
    return str(cfg)


def test_a_published_file_and_its_folder_are_read_as_they_are():
    data = np.load(B64)["data"]
    for source in (B64, B64.parent):
        steps = read_routing(source)
        assert list(steps) == [(10, 8)]  # layer 10, iteration 8: the name's numbers
        assert (steps[(10, 8)] == data).all()


def test_a_run_replays_the_published_routing(tmp_path, capsys):
    import json

    assert main(["run", _config(tmp_path, B64), "--json", "--quiet", "--set", "workload.moe.steps=0"]) == 0
    s = json.loads(capsys.readouterr().out)
    counts = np.bincount(np.load(B64)["data"].ravel(), minlength=8)
    assert s["status"] == "completed" and s["tokens"] == 64
    assert s["moe_load_imbalance"] == pytest.approx(counts.max() / counts.mean())  # 24 / 16 by hand


def test_a_data_file_under_another_name_names_the_converter(tmp_path, capsys):
    renamed = tmp_path / "mixtral_routing.npz"
    shutil.copy(B64, renamed)
    with pytest.raises(TraceError, match=r"convert_routing\.py step .*mixtral_routing\.npz --out"):
        read_routing(renamed)
    assert main(["run", _config(tmp_path, renamed), "--quiet"]) == 2
    assert "examples/traces/convert_routing.py step" in capsys.readouterr().err


def _advice(err: str) -> list[list[str]]:
    """Each change the refusal proposes, as --set arguments."""
    fixes = re.findall(r"\((--set [^)]*)\)", err)
    return [[x for s in re.findall(r"--set (\S+)", fix) for x in ("--set", s)] for fix in fixes]


def test_a_refusal_advises_changes_that_work(tmp_path, capsys):
    """Batch 1024 sends 414 tokens to expert 5: 847,872 B of input on a 262,144 B MU. The advice
    once was chip.mu_bytes alone, which the reference's 16 offset bits still limited to 262,144 B."""
    cfg = _config(tmp_path, B1024)
    assert main(["run", cfg, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "routes 414 tokens to expert 5: its input buffer of 847,872 B" in err
    fixes = _advice(err)
    assert len(fixes) == 2
    tokens = next(f for f in fixes if "workload.moe.tokens" in f[1])
    room = next(f for f in fixes if "chip.mu_bytes" in f[1])
    assert "memory.offset_bits=18" in " ".join(room)  # 2 ** 18 words of 4 B: 1 MiB, the buffer fits
    for fix in (tokens, room):
        assert main(["run", cfg, "--quiet", "--json", *fix]) == 0, fix
        assert '"status": "completed"' in capsys.readouterr().out
    most = int(tokens[1].split("=")[1])
    assert main(["run", cfg, "--quiet", "--set", f"workload.moe.tokens={most + 1}"]) == 2  # the advice is the most
    assert "larger than an MU can hold" in capsys.readouterr().err

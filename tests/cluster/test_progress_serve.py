"""A serve run's progress line: its phases from the run's own events, the anchors counted to the
anchors simulated, and the anchors' time left list-scheduled from their predicted seconds.

Known answers: the anchors a run simulates are its run_anchors rows not taken from a step cache;
the trace's span is its last arrival; a list schedule of hand-made costs on two workers (Graham
1966) is worked by hand below.
"""

from __future__ import annotations

import io

from cluster.config import load
from cluster.config.run import RUN_SCHEMA, system_config
from cluster.jobs.chip import ChipGrid
from cluster.jobs.job import simulate_case
from cluster.jobs.system import SystemGroups
from cluster.progress import Progress, WorkEta
from cluster.progress_replay import ManualClock
from cluster.progress_serve import ANCHORS, PLANNING, SERVING, ServeLine
from sim.workloads.serve.figures import AnchorLog
from sim.workloads.serve.progress import (
    AnchorDone,
    AnchorStarted,
    Planned,
    PlannedAnchor,
    Planning,
    Served,
    anchor_seconds,
)
from sim.workloads.serve.shapes import StepShape
from tests.sim.chip.chiprun import config
from tests.sim.workloads.serve.test_scheduler import logged, trace_file
from tests.sim.workloads.serve.test_system import raw as system_raw

CHIP = {"preset": "sn40l", "rows": 8, "cols": 16}
# three requests at once, then one a second later, when the first three are long served: the
# planning pass at the roofline foresees every anchor (their steps batch alike at any price)
ROWS = [(0.0, 40, 4), (0.0, 300, 3), (0.0, 20, 5), (1.0, 20, 2)]


class Recorder(ServeLine):
    """The line, keeping every event it was told."""

    def __init__(self, progress: Progress):
        super().__init__(progress)
        self.events: list = []

    def __call__(self, event) -> None:
        self.events.append(event)
        super().__call__(event)


def _line() -> tuple[Recorder, io.StringIO]:
    out = io.StringIO()
    return Recorder(Progress("run serve", stream=out, every=0.0)), out


def test_a_serve_run_tells_planning_then_its_anchors_then_serving(tmp_path):
    raw = {"chip": CHIP, "memory": {"policy": "virtual"},
           "workload": {"kind": "serve", "decode": {"trace": trace_file(tmp_path, ROWS), "model": "llama-3.1-8b",
                                                    "step_workers": 2}},
           "run": {"max_cycles": 10**12}}
    line, out = _line()
    done = simulate_case(ChipGrid(config(raw)).watched(line), progress=line.cycles)
    assert done.summary["status"] == "completed"
    simulated = [a for a in logged(done, AnchorLog) if not a.cached]
    assert line.phases == [PLANNING, ANCHORS, SERVING]
    assert isinstance(line.events[0], Planning) and isinstance(line.events[1], Planned)
    planned = line.events[1]
    assert len(planned.anchors) == len(simulated) > 1 and planned.workers == 2
    ends = [e for e in line.events if isinstance(e, AnchorDone)]
    assert len(ends) == line.done == line.total == len(simulated)  # k counts to n, n the anchors simulated
    assert {e.shape for e in ends} == {StepShape(a.tokens, a.keys, a.kv_read) for a in simulated}
    served = [e for e in line.events if isinstance(e, Served)]
    assert len(served) == done.summary["serve_steps"]
    assert all(e.span == 1.0 for e in served)  # the last arrival, s
    assert [e.seconds for e in served] == sorted(e.seconds for e in served) and served[-1].seconds > 1.0
    text = out.getvalue()
    assert "planning" in text and f"anchors 0 of {len(simulated)} simulated, about" in text
    assert "serving: " in text and "past the trace's last arrival at 1 s" in text


def test_a_serve_system_run_plans_its_anchors_and_counts_them_k_of_n():
    """serve-system makes the planning pass as serve does: the line counts its anchors (the
    prefill's, then decode's) "k of n" with n known from the start; with one worker each is
    simulated when a step needs it, the group serving in between."""
    config = system_raw()
    config["workload"]["decode"]["step_workers"] = 1
    line, out = _line()
    done = simulate_case(SystemGroups(system_config(load(RUN_SCHEMA, raw=config))).watched(line),
                         progress=line.cycles)
    assert done.summary["status"] == "completed"
    simulated = [a for a in logged(done, AnchorLog) if not a.cached]
    assert len(simulated) == 2 and not any(a.ahead for a in simulated)
    assert line.phases == [PLANNING, ANCHORS, SERVING]
    assert [type(e) for e in line.events[:4]] == [Planning, Planned, AnchorStarted, AnchorDone]
    assert len(line.events[1].anchors) == line.done == line.total == 2
    assert sum(isinstance(e, Served) for e in line.events) == done.summary["serve_steps"] == 3
    text = out.getvalue()
    assert "anchors 0 of 2 simulated" in text and "anchors 1 of 2 simulated" in text and "so far" not in text


def test_the_time_left_of_hand_made_costs_is_their_list_schedule():
    """4, 3, 2 and 1 s on two workers, each to the first free: 4 | 3 then 2 on the second (free at 3,
    ends at 5) and 1 on the first (free at 4, ends at 5): 5 s. One second in, 4 s."""
    clock = ManualClock()
    eta = WorkEta(2, clock=clock, unit_seconds=1.0)
    for k, s in enumerate([4.0, 3.0, 2.0, 1.0]):
        eta.add(k, (), s)
    assert eta.remaining() == 5.0
    for k in range(4):
        eta.started(k)
    clock.t = 1.0
    assert eta.remaining() == 4.0
    eta.drop(3)  # it will not run: 4 | 3 + 2 -> 4 s from now
    assert eta.remaining() == 4.0
    assert WorkEta(2, clock=clock).remaining() is None  # nothing predicted in seconds: no basis, no estimate


def test_the_first_item_to_finish_rescales_the_predicted_seconds():
    """Three items of 2 predicted seconds on one worker: 6 s. The first takes 4 s (twice its prediction): the
    other two are now 4 s each, at the rate work has been done (1 s a second): 8 s left, not 4."""
    clock = ManualClock()
    eta = WorkEta(1, clock=clock, unit_seconds=1.0)
    for k in range(3):
        eta.add(k, (), 2.0)
        eta.started(k)
    assert eta.remaining() == 6.0
    clock.t = 4.0
    eta.finished(0, 4.0)
    assert eta.remaining() == 8.0


def test_the_line_s_anchors_eta_from_their_predicted_seconds():
    """Anchors of 10, 6 and 2 predicted seconds on two workers: 10 | 6 + 2, 10 s; 6 s in, the 6 s one done
    as predicted: the 10 s one has 4 left, the 2 s one 2: 4 s."""
    clock = ManualClock()
    out = io.StringIO()
    line = ServeLine(Progress("run serve", stream=out, every=0.0, clock=clock))
    shapes = [StepShape(1024, 1, 0), StepShape(256, 1, 0), StepShape(1, 16, 16)]
    line(Planned(tuple(PlannedAnchor(a, s, True) for a, s in zip(shapes, (10.0, 6.0, 2.0))), 2))
    assert out.getvalue().splitlines()[-1] == "run serve: anchors 0 of 3 simulated, about 10 s left"
    clock.t = 6.0
    line(AnchorDone(shapes[1], 6.0))
    assert out.getvalue().splitlines()[-1] == "run serve: anchors 1 of 3 simulated, about 4 s left"


def test_an_anchor_s_predicted_seconds_grow_with_its_size():
    """A prefill anchor (32 tiles, 20 iterations) costs more than a decode one (6 layers) on the same chip,
    and either more on a larger chip (more CUs an iteration)."""
    from mapping.chips import RDA_PRESETS
    from mapping.models import model_preset

    m, big = model_preset("llama-3.1-8b"), RDA_PRESETS["sn40l"]
    small = config({"chip": CHIP, "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}}}).spec
    prefill, decode = StepShape(1024, 1024 * 1025 // 2, 0), StepShape(1, 1024, 1024)
    for spec in (small, big):
        assert anchor_seconds(m, prefill, spec) > 2 * anchor_seconds(m, decode, spec)
    assert anchor_seconds(m, prefill, big) > anchor_seconds(m, prefill, small)
    assert anchor_seconds(m, decode, big) > anchor_seconds(m, decode, small)


def test_a_sink_stays_in_its_process():
    """A watched chip run's shards pickled for Ray actors leave the sink behind (it draws in the driver)."""
    import pickle

    line, _ = _line()
    grid = ChipGrid(config({"chip": CHIP, "workload": {"kind": "serve", "decode": {"model": "llama-3.1-8b"}}}))
    model = grid.watched(line).model(grid.regions(2, "rows"))
    assert model.sink is line and pickle.loads(pickle.dumps(model)).sink is None

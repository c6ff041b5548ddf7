"""Progress lines: an ETA only against known work (after some of it), none against a bound, silence with quiet."""

import io

import pytest

from cluster.progress import ETA_AFTER_SECONDS, Progress, _duration


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _steady(total: float, rate: float, seconds: int, **kw) -> list[str]:
    """Lines written by a job doing ``rate`` units a second, reported once a second."""
    clock, log = Clock(), io.StringIO()
    p = Progress("job", stream=log, clock=clock, every=1.0, **kw)
    for s in range(1, seconds + 1):
        clock.t = float(s)
        p(min(rate * s, total), total, unit="points")
    return log.getvalue().splitlines()


def test_the_eta_at_a_steady_rate_is_the_work_left_over_the_rate():
    lines = _steady(1000, 10, 60)
    assert "job: 500/1,000 points, 10/s, about 50 s left" in lines
    assert "job: 100/1,000 points, 10/s, about 90 s left" not in lines  # 90 s shows as minutes
    assert "job: 100/1,000 points, 10/s, about 2 min left" in lines


def test_no_eta_in_the_first_seconds():
    lines = _steady(1000, 10, 10)
    early = [line for line in lines if int(line.split(": ")[1].split("/")[0]) < ETA_AFTER_SECONDS * 10]
    assert early and all("left" not in line for line in early)
    assert all("left" in line for line in lines if line not in early)


def test_no_eta_before_two_percent_of_the_work_is_done():
    lines = _steady(10_000, 10, 25)  # 2 % is 200 points, done at 20 s
    assert all(("left" in line) == (s >= 20) for s, line in enumerate(lines, start=1))


def test_no_eta_against_a_bound():
    lines = _steady(20_000_000, 100_000, 60, bound=True)
    assert lines and not any("left" in line for line in lines)
    assert lines[-1] == "job: 6,000,000 points (run stops by 20,000,000), 100,000/s"


def test_a_stalled_job_shows_no_rate_and_no_eta():
    lines = _steady(1000, 0, 20)
    assert lines[-1] == "job: 0/1,000 points"


def test_a_slow_rate_keeps_its_digits():
    assert _steady(100, 0.5, 10)[-1] == "job: 5/100 points, 0.5/s, about 3 min left"  # 95 s


def test_the_end_is_left_to_whoever_closes():
    clock, log = Clock(), io.StringIO()
    p = Progress("job", stream=log, clock=clock, every=0.0)
    clock.t = 10.0
    p(100, 100)
    p(150, 100)
    assert log.getvalue() == ""
    p.close("job: done")
    assert log.getvalue() == "job: done\n"


def test_quiet_writes_nothing_at_all():
    clock, log = Clock(), Terminal()
    p = Progress("job", quiet=True, stream=log, clock=clock, every=0.0)
    for s in range(1, 100):
        clock.t = float(s)
        p(s, 100)
    p.close("job: done")
    assert log.getvalue() == ""


def test_a_terminal_redraws_one_line_and_close_clears_it():
    clock, term = Clock(), Terminal()
    p = Progress("job", stream=term, clock=clock)  # a terminal: redrawn every 0.5 s
    for s in range(1, 5):
        clock.t = float(s)
        p(s, 100)
    text = term.getvalue()
    assert "\n" not in text and text.count("\r") == 4
    assert all(len(chunk) == 78 for chunk in text.split("\r")[1:])
    p.close("job: done")
    assert term.getvalue().endswith("\r" + " " * 78 + "\rjob: done\n")


@pytest.mark.parametrize("seconds,text", [(0, "0 s"), (59, "59 s"), (60, "1 min"), (3599, "60 min"),
                                          (3600, "1.0 h"), (5400, "1.5 h")])
def test_durations(seconds, text):
    assert _duration(seconds) == text


def test_a_notebook_s_output_gets_one_line_redrawn_in_place_as_a_terminal_does():
    """ipykernel's OutStream is no terminal (isatty() is False) but a notebook draws a carriage
    return as a redraw of the line: the line is redrawn there every half second, not logged every 30 s."""
    OutStream = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})
    clock, out = Clock(), OutStream()
    p = Progress("run", stream=out, clock=clock)
    for s in range(1, 11):
        clock.t = s / 2
        p(s, 100, unit="cycles")
    p.close("run: done")
    text = out.getvalue()
    assert text.count("\rrun: ") >= 9 and text.count("\n") == 1 and text.endswith("\rrun: done\n")
    logged = io.StringIO()  # a file: nothing before 30 s
    p = Progress("run", stream=logged, clock=clock)
    for s in range(11, 21):
        clock.t = s / 2
        p(s, 100, unit="cycles")
    assert logged.getvalue() == ""

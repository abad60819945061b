"""The progress display of `python -m autograder grade`: start-up phases, an ETA from the work left at the
current pace, failures counted, and a last line that ends."""
import io

from autograder.grading import ProgressBar
from autograder.workers import Outcome


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def graded(student, score=5.0):
    return Outcome(student, "90_toy", score=score, max_score=5.0)


def test_the_eta_is_the_work_left_at_the_pace_of_the_last_submissions_not_since_the_start():
    clock, stream = Clock(), io.StringIO()
    bar = ProgressBar(stream, clock=clock, window=5)
    bar.phase("connecting to the Dask scheduler at tcp://127.0.0.1:8786")
    clock.now = 100.0  # a cluster's start-up: no grading yet
    for done in range(1, 11):  # then one notebook a second
        clock.now += 1.0
        bar(done, 20, graded(f"s{done}"))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[grading] connecting to the Dask scheduler at tcp://127.0.0.1:8786"
    assert "ETA --" in lines[1]  # one finished: no pace yet
    assert "10/20" in lines[-1] and "ETA 0m10s" in lines[-1]  # a plain average would say 1m50s


def test_failures_move_the_bar_are_counted_and_the_last_line_ends():
    stream = Terminal()
    bar = ProgressBar(stream)
    bar(1, 3, graded("ada"))
    bar.phase("left out worker w1 (tcp://127.0.0.1:4000): RuntimeError: grader version ...")
    bar(2, 3, ("bo", "90_toy", "KilledWorker: ..."))
    bar(3, 3, graded("cy", 3.0))
    text = stream.getvalue()
    assert text.endswith("3/3  1 not graded  done  cy/90_toy: 3/5\n")
    assert "bo/90_toy: not graded" in text
    # the phase line ends, and the bar is drawn again under it
    assert "RuntimeError: grader version ...\n[" in text
    assert text.count("\n") == 2

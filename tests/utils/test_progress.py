"""Progress lines: a long step says so, a short one says nothing."""

import io
import time

from hpcgnn.utils.progress import Step


def test_a_short_step_says_nothing():
    out = io.StringIO()
    with Step("reading", stream=out):
        pass
    assert out.getvalue() == ""


def test_a_long_step_says_it_is_still_running_and_its_time():
    out = io.StringIO()
    with Step("setting up", delay=0.05, every=0.05, stream=out):
        time.sleep(0.3)  # lets the heartbeat run, as torch and NumPy steps do
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("still setting up: ") and lines[-1].startswith(
        "setting up: done in ")


def test_a_step_that_holds_the_interpreter_is_announced():
    out = io.StringIO()
    with Step("partitioning by metis", announce=True, stream=out):
        pass
    assert out.getvalue().splitlines() == ["partitioning by metis ...",
                                          out.getvalue().splitlines()[1]]
    assert out.getvalue().splitlines()[1].startswith("partitioning by metis: done in ")
    silent = io.StringIO()
    with Step("x", announce=True, enabled=False, stream=silent):
        pass
    assert silent.getvalue() == ""

"""SIGTERM and SIGINT become ``Interrupted`` (exit status 128 + signal), held when asked."""

from __future__ import annotations

import os
import signal

import pytest

from hpcgnn.cli.common import launched_by_mpi
from hpcgnn.utils.interrupts import Interrupted, held, interrupts_unwind, raise_if_interrupted

serial = pytest.mark.skipif(launched_by_mpi(), reason="signals itself; serial runs only")


@serial
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_raises_once_and_the_handlers_come_back(sig, status):
    before = signal.getsignal(sig)
    with interrupts_unwind():
        with pytest.raises(Interrupted) as stop:
            os.kill(os.getpid(), sig)
        # a second signal during the clean-up would end the process at once
        assert signal.getsignal(signal.SIGTERM) == signal.getsignal(signal.SIGINT) == signal.SIG_DFL
    assert stop.value.signum == sig and stop.value.exit_status == status
    assert str(stop.value) == signal.Signals(sig).name
    assert signal.getsignal(sig) == before


@serial
def test_a_held_block_runs_whole_then_the_signal_is_raised():
    done = []
    with interrupts_unwind(), pytest.raises(Interrupted, match="SIGTERM"):
        with held():
            os.kill(os.getpid(), signal.SIGTERM)
            with held():
                done.append("inner")
            done.append("outer")
        done.append("after")  # not reached
    assert done == ["inner", "outer"]


class _Finaliser:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler raises here, where Python drops the exception
            pass


@serial
def test_an_interrupt_lost_in_a_finaliser_is_raised_at_the_next_check(capsys):
    with interrupts_unwind(), pytest.raises(Interrupted, match="SIGTERM"):
        _Finaliser()
        lost = True
        raise_if_interrupted()
    assert lost and capsys.readouterr().err == ""


def _c_code_that_replaces_exceptions() -> None:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler raises here
            pass
    except Interrupted as err:
        raise TypeError("Operation not defined for data type class") from err


@serial
def test_an_interrupt_replaced_by_another_exception_is_still_the_interrupt():
    with pytest.raises(Interrupted, match="SIGINT") as stop, interrupts_unwind():
        _c_code_that_replaces_exceptions()
    assert stop.value.exit_status == 130 and isinstance(stop.value.__cause__, TypeError)


@serial
def test_an_error_without_a_signal_is_left_as_it_is():
    with pytest.raises(TypeError), interrupts_unwind():
        raise TypeError("not a signal")

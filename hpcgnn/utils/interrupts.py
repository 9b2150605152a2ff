"""SIGTERM stops a command the way Ctrl-C (SIGINT) does: by unwinding, so nothing is left.

While a command runs (:func:`interrupts_unwind`, entered by the command line), both
signals raise :class:`Interrupted`, a ``KeyboardInterrupt``, in the main thread. The
exception unwinds through every ``with`` block, so writers remove their temporary files
and spill directories and a previous output stays as it was; the command line then
prints one line and exits with ``128 + signal`` (130 for SIGINT, 143 for SIGTERM), as a
shell reports a process killed by that signal. A second signal is not caught: it ends
the process at once.

Creating a temporary file and recording it for clean-up must not be split by the
exception, so such steps run :func:`held`: a signal arriving meanwhile is raised at the
end of the block. Python drops an exception raised while it runs a finaliser (a
``__del__``, a weakref callback); so the signal is remembered and raised again by
:func:`raise_if_interrupted`, which runs before an output is renamed into place. C code
that runs Python callbacks may also replace the exception with its own (h5py, entering a
logging call while it converts an attribute, raises ``TypeError``): any exception that
leaves :func:`interrupts_unwind` after a signal arrived is reported as that signal.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread when a SIGINT or a SIGTERM arrives.

    Attributes
    ----------
    signum : int
        The signal received.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """``128 + signum``, the shell's status for a process ended by the signal."""
        return 128 + self.signum


class _State:
    held = 0  # depth of held() blocks
    received: int | None = None  # the signal, once one arrived


def _interrupt(signum: int, frame: object) -> None:
    for s in SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    _State.received = signum
    if not _State.held:
        raise Interrupted(signum)


def raise_if_interrupted() -> None:
    """Raise :class:`Interrupted` if a signal arrived (even one whose exception was lost)."""
    if _State.received is not None and not _State.held:
        raise Interrupted(_State.received)


@contextmanager
def held() -> Iterator[None]:
    """Run the block whole: a SIGINT or SIGTERM arriving meanwhile is raised at its end."""
    _State.held += 1
    try:
        yield
    finally:
        _State.held -= 1
        raise_if_interrupted()


@contextmanager
def interrupts_unwind() -> Iterator[None]:
    """Turn SIGINT and SIGTERM into :class:`Interrupted` inside the block.

    The previous handlers are restored on leaving. Outside the main thread, where Python
    cannot install handlers, the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hook = sys.unraisablehook

    def unraisable(report: sys.UnraisableHookArgs) -> None:
        if not isinstance(report.exc_value, Interrupted):  # else raised again later
            hook(report)

    previous = {s: signal.signal(s, _interrupt) for s in SIGNALS}
    sys.unraisablehook = unraisable
    _State.received = None
    try:
        yield
    except Exception as err:
        if _State.received is None:
            raise
        raise Interrupted(_State.received) from err  # the signal's exception was replaced
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sys.unraisablehook = hook
        _State.received = None

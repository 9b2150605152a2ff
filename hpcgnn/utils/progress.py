"""Progress on stderr for long steps.

A bar where the work is counted (:class:`Progress`: prepare, partition, info), lines for a
step that cannot be counted (:class:`Step`: METIS, a training run's set-up).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    """Progress bar on stderr that stays silent for steps shorter than ``delay`` seconds.

    Parameters
    ----------
    label
        What is being done, e.g. ``"sorting edges"``.
    total
        Number of units of work, or ``None`` when unknown (a counter is shown instead).
    unit
        Name of a unit, shown after the counts.
    delay
        Seconds before the bar first appears.
    enabled
        Set ``False`` to silence it (non-root ranks, ``--quiet``).
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "",
        *,
        delay: float = 2.0,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._start = time.perf_counter()
        self._delay = delay
        self._last = 0.0
        self._shown = False
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        """Record ``n`` more units of work done."""
        self.done += n
        now = time.perf_counter()
        elapsed = now - self._start
        interval = 0.2 if self._tty else 10.0
        if self.enabled and elapsed >= self._delay and now - self._last >= interval:
            self._last = now
            self._draw(elapsed, final=False)

    def close(self) -> None:
        """Draw the final state if the bar was ever shown."""
        if self._shown:
            self._draw(time.perf_counter() - self._start, final=True)

    def _draw(self, elapsed: float, final: bool) -> None:
        self._shown = True
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            rate = self.done / elapsed if elapsed > 0 else 0.0
            eta = (self.total - self.done) / rate if rate > 0 else 0.0
            text = (
                f"{self.label}: [{bar}] {100 * frac:5.1f}% {self.done}/{self.total}{unit}"
                f" {elapsed:6.1f}s eta {eta:5.1f}s"
            )
        else:
            text = f"{self.label}: {self.done}{unit} {elapsed:6.1f}s"
        end = "\n" if (final or not self._tty) else ""
        prefix = "\r" if self._tty else ""
        self.stream.write(prefix + text + end)
        self.stream.flush()


class Step:
    """Lines on stderr for one long step whose progress cannot be counted.

    A step that may take long says so when it starts (``announce``: e.g. METIS on a large
    graph, which holds the interpreter until it returns), a line every ``every`` seconds
    while it runs where the step lets Python threads run (``still <label>: 30 s``), and
    its time when it ends if it said anything. A short step prints nothing.

    Parameters
    ----------
    label
        What is being done, e.g. ``"partitioning 2,000,000 vertices with METIS"``.
    announce
        Say it at once (the caller expects it to be long); otherwise only after ``delay``.
    delay, every
        Seconds before the first line, and between lines.
    enabled
        ``False``: silent (non-root ranks, quiet runs).
    """

    def __init__(
        self, label: str, *, announce: bool = False, delay: float = 10.0, every: float = 30.0,
        enabled: bool = True, stream: TextIO | None = None,
    ) -> None:
        self.label, self.announce, self.delay, self.every = label, announce, delay, every
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._said = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0

    def __enter__(self) -> Step:
        self._start = time.perf_counter()
        if not self.enabled:
            return self
        if self.announce:
            self._say(f"{self.label} ...")
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self._said and exc[0] is None:
            self._say(f"{self.label}: done in {time.perf_counter() - self._start:.1f} s")

    def _beat(self) -> None:
        wait = self.delay
        while not self._done.wait(wait):
            self._say(f"still {self.label}: {time.perf_counter() - self._start:.0f} s")
            wait = self.every

    def _say(self, text: str) -> None:
        self._said = True
        self.stream.write(text + "\n")
        self.stream.flush()

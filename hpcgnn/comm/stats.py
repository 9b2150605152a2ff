"""Per-category counters of communicated bytes, calls and time, plus compute phases.

One :class:`CommStats` is shared by every communicator of a process grid and by the
compute kernels the distributed algorithms call, so it sees every phase of an epoch:
communication categories (bytes, calls, seconds) and compute phases (seconds). With
tracing on it also keeps the intervals, for the Chrome/Perfetto trace.

Every interval is read from one clock, :attr:`CommStats.clock`: the device's
(:meth:`hpcgnn.backend.Device.clock`), which the process grid passes in, or the CPU clock
when the stats are made without a device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hpcgnn.backend import cpu


@dataclass
class CategoryStats:
    """Counters of one category on one rank."""

    calls: int = 0
    bytes: int = 0
    seconds: float = 0.0


@dataclass
class Span:
    """One interval of a phase on this rank (seconds since the stats were created)."""

    name: str
    start: float
    end: float
    kind: str  # "comm" or "compute" or "epoch"
    args: dict[str, Any] | None = None  # bytes, communicator, layer, pass, stage, step


@dataclass
class CommStats:
    """Counters per named category, shared by every communicator of one process grid.

    ``bytes`` is the *received volume* of this rank under a bandwidth-optimal schedule,
    independent of the MPI library's internal algorithm (see ``docs/communication.md``):

    - broadcast of ``m`` bytes: ``m`` on every non-root rank, 0 on the root;
    - all-reduce of ``m`` bytes over ``p`` ranks: ``2 m (p-1)/p`` (reduce-scatter +
      all-gather);
    - reduce-scatter of ``m`` bytes in total: ``m`` minus this rank's block;
    - all-gather(v): the total gathered minus this rank's own contribution;
    - all-to-all(v) and point-to-point: the bytes received from other ranks;
    - Python objects (``*_obj`` calls, category ``"control"`` by default): the pickled
      size of the objects received from other ranks. The row counts that an all-to-allv
      or all-gatherv exchanges first when not given are control traffic too (``8 (p-1)``
      bytes for an all-to-allv).

    Summing ``bytes`` over ranks therefore gives the total volume moved, which the paper
    cost models predict per category.

    ``clock`` (seconds, monotonic) times every call and phase; it defaults to the CPU
    device's clock. ``origin`` is the clock's reading when the stats were created or last
    reset.

    ``paths`` names, per category, how its buffers reached MPI (``"direct"``,
    ``"cuda-aware"``, ``"staged"``: :mod:`hpcgnn.comm.wire`), and ``staged`` the bytes its
    calls copied to and from host staging buffers: not network traffic, so not in
    ``bytes``.

    With tracing on, every span carries ``args`` for the trace viewer: a communication
    call its ``bytes`` and communicator (``comm``), and every span the tags of the
    :meth:`tagged` blocks it runs in (``layer``, ``pass``, ``stage``, ``step``...).
    """

    categories: dict[str, CategoryStats] = field(default_factory=dict)
    compute: dict[str, float] = field(default_factory=dict)
    tracing: bool = False
    max_spans: int = 200_000
    spans: list[Span] = field(default_factory=list)
    clock: Callable[[], float] = field(default=cpu().clock, repr=False, compare=False)
    origin: float = field(init=False)
    tags: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    paths: dict[str, set[str]] = field(default_factory=dict)
    staged: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.origin = self.clock()

    def record(
        self, category: str, nbytes: float, seconds: float, span: str | None = None,
        args: dict[str, Any] | None = None, path: str | None = None, staged: int = 0,
    ) -> None:
        """Add one call moving ``nbytes`` into this rank that took ``seconds`` (ending now).

        ``span`` names the call in the trace (default ``category``), e.g. the stage of a
        planned exchange, while its bytes and time count under ``category``; ``args``
        (e.g. the communicator, the peers) go into the trace event next to the bytes.
        ``path`` is how the call's buffers reached MPI (``None``: no buffers), ``staged``
        the bytes it copied through host staging buffers.
        """
        if path is not None:
            self.paths.setdefault(category, set()).add(path)
        if staged:
            self.staged[category] = self.staged.get(category, 0) + staged
        s = self.categories.get(category)
        if s is None:
            s = self.categories[category] = CategoryStats()
        s.calls += 1
        s.bytes += round(nbytes)
        s.seconds += seconds
        if self.tracing:
            end = self.clock() - self.origin
            self._span(span or category, end - seconds, end, "comm",
                       {"bytes": round(nbytes), **(args or {})})

    @contextmanager
    def tagged(self, **tags: Any) -> Iterator[None]:
        """Tag every span recorded inside (``layer=2``, ``stage=1``...) for the trace."""
        if not self.tracing:
            yield
            return
        before = self.tags
        self.tags = {**before, **tags}
        try:
            yield
        finally:
            self.tags = before

    @contextmanager
    def phase(self, name: str, kind: str = "compute") -> Iterator[None]:
        """Time a compute phase (``local_spmm``, ``gemm``...) or an epoch."""
        t0 = self.clock()
        try:
            yield
        finally:
            t1 = self.clock()
            if kind == "compute":
                self.compute[name] = self.compute.get(name, 0.0) + (t1 - t0)
            if self.tracing:
                self._span(name, t0 - self.origin, t1 - self.origin, kind)

    def _span(
        self, name: str, start: float, end: float, kind: str, args: dict | None = None
    ) -> None:
        if len(self.spans) < self.max_spans:
            merged = {**self.tags, **(args or {})}
            self.spans.append(Span(name, start, end, kind, merged or None))

    def reset(self) -> None:
        """Zero all counters, drop recorded spans and restart the trace clock.

        Call right after a barrier so that every rank's clock starts together.
        """
        self.categories.clear()
        self.compute.clear()
        self.paths.clear()
        self.staged.clear()
        self.spans.clear()
        self.origin = self.clock()

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Return a plain-dict copy: ``{category: {calls, bytes, seconds}}``."""
        return {
            k: {"calls": v.calls, "bytes": v.bytes, "seconds": v.seconds}
            for k, v in sorted(self.categories.items())
        }

    def seconds_by_phase(self) -> dict[str, float]:
        """Seconds per communication category and compute phase."""
        out = {k: v.seconds for k, v in self.categories.items()}
        out.update(self.compute)
        return dict(sorted(out.items()))

    def total_bytes(self) -> int:
        """Bytes over all categories."""
        return sum(v.bytes for v in self.categories.values())

    def total_seconds(self) -> float:
        """Communication seconds over all categories."""
        return sum(v.seconds for v in self.categories.values())

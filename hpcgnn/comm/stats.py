"""Per-category counters of communicated bytes, calls and time, plus compute phases.

One :class:`CommStats` is shared by every communicator of a process grid and by the
compute kernels the distributed algorithms call, so it sees every phase of an epoch:
communication categories (bytes, calls, seconds) and compute phases (seconds). With
tracing on it also keeps the intervals, for the Chrome/Perfetto trace.

Every interval is read from one clock, the device's (:meth:`hpcgnn.backend.Device.mark`
and :meth:`~hpcgnn.backend.Device.clock`), which the process grid passes in, or the CPU
clock when the stats are made without a device. Calls and phases are timed by marks, which
on a GPU are CUDA events recorded without a wait: their seconds are settled when the
counters are read (:meth:`CommStats.settle`, once an epoch), so the host runs ahead of the
device instead of waiting at every phase.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcgnn.backend import Mark, cpu

#: The category of ``--sync-comm``'s waits: a rank's seconds waiting for the ranks of a
#: collective to arrive (skew: load imbalance, shared cores), apart from the transfer.
WAIT = "wait"

@dataclass
class CategoryStats:
    """Counters of one category on one rank."""

    calls: int = 0
    bytes: int = 0
    seconds: float = 0.0


class SlotTimer:
    """Seconds per slot (e.g. per exchange stage), summed from pairs of marks read lazily.

    :meth:`add` queues an interval without waiting for the device; :attr:`seconds` reads
    the queue (one wait on a GPU) and returns the totals.
    """

    def __init__(self, slots: int) -> None:
        self._seconds = np.zeros(slots)
        self._pending: list[tuple[int, Mark, Mark]] = []

    def add(self, slot: int, start: Mark, end: Mark) -> None:
        """Add the interval from ``start`` to ``end`` to ``slot``."""
        self._pending.append((slot, start, end))

    @property
    def seconds(self) -> np.ndarray:
        """Seconds per slot so far (the array itself)."""
        for slot, start, end in self._pending:
            self._seconds[slot] += end.seconds - start.seconds
        self._pending.clear()
        return self._seconds

    def reset(self) -> None:
        """Zero every slot."""
        self._pending.clear()
        self._seconds[:] = 0.0


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

    ``mark`` times every call and phase (a :class:`~hpcgnn.backend.Mark`, read lazily) and
    ``clock`` reads seconds now (monotonic, synchronising); both default to the CPU
    device's. Timed intervals wait as pairs of marks until :meth:`settle`, which every
    reader of the counters calls first (``categories``, ``compute`` and ``spans`` settle
    when read).
    ``origin`` is the clock's reading when the stats were created or last reset.

    ``paths`` names, per category, how its buffers reached MPI (``"direct"``,
    ``"cuda-aware"``, ``"staged"``: :mod:`hpcgnn.comm.wire`), and ``staged`` the bytes its
    calls copied to and from host staging buffers: not network traffic, so not in
    ``bytes``.
    ``methods`` splits a category's bytes by the pair method of the messages that carried
    them (DGCL's per-pair choice, :mod:`hpcgnn.planning.methods`: ``ipc``,
    ``host-staged``, ``nic``), for the calls whose messages name one.

    With tracing on, every span carries ``args`` for the trace viewer: a communication
    call its ``bytes`` and communicator (``comm``), and every span the tags of the
    :meth:`tagged` blocks it runs in (``epoch``, ``layer``, ``pass``, ``stage``, ``step``...).
    """

    tracing: bool = False
    #: ``--sync-comm``: every collective waits for its communicator's ranks first, that
    #: wait timed apart as :data:`WAIT` (:meth:`hpcgnn.comm.Comm._call`), so a category's
    #: seconds are its transfers' alone, the quantity the cost model predicts.
    sync_waits: bool = False
    max_spans: int = 200_000
    clock: Callable[[], float] = field(default=cpu().clock, repr=False, compare=False)
    mark: Callable[[], Mark] = field(default=cpu().mark, repr=False, compare=False)
    origin: float = field(init=False)
    tags: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    paths: dict[str, set[str]] = field(default_factory=dict)
    staged: dict[str, int] = field(default_factory=dict)
    methods: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._categories: dict[str, CategoryStats] = {}
        self._compute: dict[str, float] = {}
        self._spans: list[Span] = []
        self.origin = self.clock()
        # intervals not yet read: (kind, key, start mark or None, end mark, seconds or None,
        # span name, span args); kind "comm" (a category) or a phase kind
        self._pending: list[tuple[str, str, Mark | None, Mark, float | None, str,
                                  dict[str, Any] | None]] = []

    @property
    def categories(self) -> dict[str, CategoryStats]:
        """Counters per communication category (settled first)."""
        self.settle()
        return self._categories

    @property
    def compute(self) -> dict[str, float]:
        """Seconds per compute phase (settled first)."""
        self.settle()
        return self._compute

    @property
    def spans(self) -> list[Span]:
        """The trace's intervals so far (settled first)."""
        self.settle()
        return self._spans

    def record(
        self, category: str, nbytes: float, seconds: float | None = None,
        span: str | None = None, args: dict[str, Any] | None = None, path: str | None = None,
        staged: int = 0, since: Mark | None = None, methods: dict[str, int] | None = None,
    ) -> None:
        """Add one call moving ``nbytes`` into this rank, ending now.

        Its time: ``since`` a mark (read lazily), or ``seconds`` (neither: none of its
        own). ``span`` names the call in the trace (default ``category``), e.g. the stage of
        a planned exchange, while its bytes and time count under ``category``; ``args``
        (e.g. the communicator, the peers) go into the trace event next to the bytes.
        ``path`` is how the call's buffers reached MPI (``None``: no buffers), ``staged``
        the bytes it copied through host staging buffers, ``methods`` its bytes by pair
        method (:attr:`methods`).
        """
        for method, b in (methods or {}).items():
            split = self.methods.setdefault(category, {})
            split[method] = split.get(method, 0) + b
        if path is not None:
            self.paths.setdefault(category, set()).add(path)
        if staged:
            self.staged[category] = self.staged.get(category, 0) + staged
        s = self._categories.get(category)
        if s is None:
            s = self._categories[category] = CategoryStats()
        s.calls += 1
        s.bytes += round(nbytes)
        if since is None and not self.tracing:
            s.seconds += seconds or 0.0
            return
        trace = {**self.tags, "bytes": round(nbytes), **(args or {})} if self.tracing else None
        self._defer("comm", category, since, seconds, span or category, trace)

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
        """Time a compute phase (``local_spmm``, ``gemm``...) or an epoch (no wait)."""
        if kind != "compute" and not self.tracing:
            yield
            return
        t0 = self.mark()
        try:
            yield
        finally:
            self._defer(kind, name, t0, None, name, dict(self.tags) if self.tracing else None)

    def _defer(
        self, kind: str, key: str, since: Mark | None, seconds: float | None, span: str,
        args: dict[str, Any] | None,
    ) -> None:
        """Queue an interval ending now, to be read by :meth:`settle`."""
        self._pending.append((kind, key, since, self.mark(), seconds, span, args))

    def settle(self) -> None:
        """Read the queued intervals into the counters and the trace (waits for the device).

        Readers of the counters call it first; it is cheap when nothing is queued.
        """
        pending, self._pending = self._pending, []
        for kind, key, since, end, seconds, span, args in pending:
            t1 = end.seconds
            t0 = since.seconds if since is not None else t1 - (seconds or 0.0)
            if kind == "comm":
                self._categories[key].seconds += t1 - t0
            elif kind == "compute":
                self._compute[key] = self._compute.get(key, 0.0) + (t1 - t0)
            if args is not None:
                self._span(span, t0 - self.origin, t1 - self.origin, kind, args)

    def _span(
        self, name: str, start: float, end: float, kind: str, args: dict | None = None
    ) -> None:
        if len(self._spans) < self.max_spans:
            self._spans.append(Span(name, start, end, kind, args or None))

    def reset(self) -> None:
        """Zero all counters, drop recorded spans and restart the trace clock.

        Call right after a barrier so that every rank's clock starts together.
        """
        self.settle()  # the pending marks' events are read, not left waiting
        self._categories.clear()
        self._compute.clear()
        self.paths.clear()
        self.staged.clear()
        self.methods.clear()
        self._spans.clear()
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
        return sum(v.bytes for v in self._categories.values())  # bytes need no settling

    def total_seconds(self) -> float:
        """Communication seconds over all categories."""
        return sum(v.seconds for v in self.categories.values())


@contextmanager
def layer_span(stats: CommStats | None, layer: int | None, direction: str) -> Iterator[None]:
    """Tag the spans recorded inside with ``layer`` and ``direction`` (nothing without both)."""
    if stats is None or layer is None:
        yield
        return
    with stats.tagged(layer=layer, direction=direction):
        yield

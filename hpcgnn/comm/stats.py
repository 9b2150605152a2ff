"""Per-category counters of communicated bytes, calls and time."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CategoryStats:
    """Counters of one category on one rank."""

    calls: int = 0
    bytes: int = 0
    seconds: float = 0.0


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
    - all-to-all(v) and point-to-point: the bytes received from other ranks.

    Summing ``bytes`` over ranks therefore gives the total volume moved, which the paper
    cost models predict per category.
    """

    categories: dict[str, CategoryStats] = field(default_factory=dict)

    def record(self, category: str, nbytes: float, seconds: float) -> None:
        """Add one call moving ``nbytes`` into this rank that took ``seconds``."""
        s = self.categories.get(category)
        if s is None:
            s = self.categories[category] = CategoryStats()
        s.calls += 1
        s.bytes += round(nbytes)
        s.seconds += seconds

    def reset(self) -> None:
        """Zero all counters."""
        self.categories.clear()

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Return a plain-dict copy: ``{category: {calls, bytes, seconds}}``."""
        return {
            k: {"calls": v.calls, "bytes": v.bytes, "seconds": v.seconds}
            for k, v in sorted(self.categories.items())
        }

    def total_bytes(self) -> int:
        """Bytes over all categories."""
        return sum(v.bytes for v in self.categories.values())

    def total_seconds(self) -> float:
        """Seconds over all categories."""
        return sum(v.seconds for v in self.categories.values())

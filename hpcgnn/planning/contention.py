"""Shared resources inside a host, inferred from pairs of ranks measured at once.

DGCL (section 3, Table 3) shows that GPUs sending through one QPI at once each get a
fraction of it (9.5, 5.12, 3.34 GB/s for 1, 2, 3 GPUs); its cost model charges such a
shared connection the bytes of all links through it in a stage. The topology files name
these resources by hand (``shared``); ``hpcgnn plan --calibrate`` finds them: it times
every pair of ranks of a host alone and every two disjoint pairs of it at once
(:func:`hpcgnn.comm.calibrate.pair_contention`), and two pairs *contend* when together
they take at least :data:`SHARED_SLOWDOWN` times as long as the slower of them alone.
Contending pairs, joined where they have a rank in common, share one resource, a PCIe
switch, a socket link or the memory bus: :func:`shared_buses` returns them with the bytes
per second all their transfers move together, which
:func:`hpcgnn.planning.topology.measured_topology` writes as a ``within`` shared resource
that the pairs' links pass through. Pure: no torch, no MPI.
"""

from __future__ import annotations

from dataclasses import dataclass

Pair = tuple[int, int]

#: Two pairs whose transfers at once take this many times the slower one alone share a
#: resource: independent pairs take 1x, pairs through one full resource 2x.
SHARED_SLOWDOWN = 1.5


@dataclass(frozen=True)
class PairTiming:
    """Two disjoint pairs of one host timed alone and at once.

    Attributes
    ----------
    host
        Their host.
    pairs
        The two pairs ``(a, b)``, ``a < b``.
    alone_s
        Seconds of each pair alone (both ranks send ``nbytes`` to each other at once).
    together_s
        Seconds of both pairs at once (the slowest rank).
    """

    host: str
    pairs: tuple[Pair, Pair]
    alone_s: tuple[float, float]
    together_s: float

    @property
    def slowdown(self) -> float:
        """Time together over the slower pair's time alone."""
        alone = max(self.alone_s)
        return self.together_s / alone if alone > 0 else 1.0

    @property
    def shared(self) -> bool:
        """Whether the two pairs contend (:data:`SHARED_SLOWDOWN`)."""
        return self.slowdown >= SHARED_SLOWDOWN

    def as_dict(self) -> dict[str, object]:
        """The record of the calibrated topology's ``contention`` list."""
        return {
            "host": self.host,
            "pairs": [list(p) for p in self.pairs],
            "alone_us": [round(t * 1e6, 3) for t in self.alone_s],
            "together_us": round(self.together_s * 1e6, 3),
            "slowdown": round(self.slowdown, 3),
            "shared": self.shared,
        }


@dataclass(frozen=True)
class SharedBus:
    """A resource inside a host that some of its pairs share.

    Attributes
    ----------
    host
        The host.
    pairs
        The pairs whose links pass through it, sorted.
    bytes_per_s
        The bytes all transfers through it move together per second: the best of its
        contending measurements (two pairs, both directions, over their time together).
    """

    host: str
    pairs: tuple[Pair, ...]
    bytes_per_s: float


def shared_buses(
    timings: list[PairTiming], nbytes: int, skip: set[str] | None = None
) -> list[SharedBus]:
    """The resources the contending pairs of ``timings`` share (see the module doc).

    ``nbytes``: what each rank of a pair sent to the other in each measurement; ``skip``:
    hosts whose timings infer nothing (ranks sharing cores slow each other down by that,
    which the topology's core pools charge already). Two
    contending pairs put their four ranks behind one resource; contending pairs with a
    rank in common join the same one (two GPUs per PCIe switch: 0-2 with 1-3 and 0-3 with
    1-2 contend on the switches' uplinks, one resource for the four pairs). Each resource
    carries the pairs seen contending, in the order of its lowest rank.
    """
    parent: dict[int, int] = {}

    def root(r: int) -> int:
        while parent.setdefault(r, r) != r:
            r = parent[r]
        return r

    shared = [t for t in timings if t.shared and t.host not in (skip or set())]
    for t in shared:
        for r in (*t.pairs[0], *t.pairs[1]):
            a, b = root(t.pairs[0][0]), root(r)
            parent[max(a, b)] = min(a, b)
    pairs: dict[int, set[Pair]] = {}
    rate: dict[int, float] = {}
    host: dict[int, str] = {}
    for t in shared:
        g = root(t.pairs[0][0])
        pairs.setdefault(g, set()).update(t.pairs)
        rate[g] = max(rate.get(g, 0.0), 4 * nbytes / t.together_s)  # 2 pairs, both ways
        host[g] = t.host
    return [SharedBus(host[g], tuple(sorted(pairs[g])), rate[g]) for g in sorted(pairs)]

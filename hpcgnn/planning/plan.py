"""Communication plans: per-vertex trees, per-stage send/receive tables, reverse plans.

A plan is a list of *routes*: an array of vertex ids that all take the same tree, and the
tree as ``(stage, src, dst)`` edges (stages count from 1; stage ``k`` is the ``k``-th hop
from the vertex's source rank). The send table of ``src`` and the receive table of ``dst``
at stage ``k`` are the same id array, keyed ``(k, src, dst)``; the tuples
``(src, dst, k, T^s, T^r)`` of the DGCL paper are ``(src, dst, k, ids, ids)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpcgnn.planning.relation import Relation

Edge = tuple[int, int, int]
TableKey = tuple[int, int, int]
SubKey = tuple[int, int, int, int]


@dataclass
class Plan:
    """A communication plan over ``num_ranks`` ranks.

    Attributes
    ----------
    num_ranks : int
        Ranks of the topology.
    routes : list of (numpy.ndarray, tuple of Edge)
        Vertex ids and the ``(stage, src, dst)`` tree they all take.
    """

    num_ranks: int
    routes: list[tuple[np.ndarray, tuple[Edge, ...]]] = field(default_factory=list)

    @property
    def num_stages(self) -> int:
        """Deepest stage used (0 for an empty plan)."""
        return max((e[0] for _, tree in self.routes for e in tree), default=0)

    def counts(self) -> dict[TableKey, int]:
        """Number of vertices per ``(stage, src, dst)`` table."""
        out: dict[TableKey, int] = {}
        for ids, tree in self.routes:
            for e in tree:
                out[e] = out.get(e, 0) + len(ids)
        return dict(sorted(out.items()))

    def tables(self) -> dict[TableKey, np.ndarray]:
        """Sorted vertex ids per ``(stage, src, dst)``.

        Each array is the send table of ``src`` and the receive table of ``dst`` at that
        stage.
        """
        parts: dict[TableKey, list[np.ndarray]] = {}
        for ids, tree in self.routes:
            for e in tree:
                parts.setdefault(e, []).append(ids)
        return {k: np.sort(np.concatenate(v)) for k, v in sorted(parts.items())}


def reverse_tables(
    tables: dict[TableKey, np.ndarray], num_stages: int
) -> dict[TableKey, np.ndarray]:
    """Tables of the backward (gradient) exchange.

    Forward stage ``k`` becomes backward stage ``num_stages + 1 - k`` and sender and
    receiver swap: ``(k, s, d) -> (num_stages + 1 - k, d, s)`` with the same ids.
    """
    return dict(
        sorted(((num_stages + 1 - k, d, s), ids) for (k, s, d), ids in tables.items())
    )


def occurrences(idx: np.ndarray) -> np.ndarray:
    """``occ[j]``: how many times ``idx[j]`` occurs in ``idx[:j]``."""
    idx = np.asarray(idx)
    order = np.argsort(idx, kind="stable")
    sid = idx[order]
    start = np.r_[True, sid[1:] != sid[:-1]] if len(sid) else np.zeros(0, dtype=bool)
    grp_start = np.maximum.accumulate(np.where(start, np.arange(len(sid)), 0))
    occ = np.empty(len(sid), dtype=np.int64)
    occ[order] = np.arange(len(sid)) - grp_start
    return occ


def split_substages(tables: dict[TableKey, np.ndarray]) -> dict[SubKey, np.ndarray]:
    """Split each stage so that no rank receives the same vertex twice in one sub-stage.

    Within a stage, a receiver's tables from all senders are scanned in sender order; the
    ``j``-th occurrence of a vertex goes to sub-stage ``j`` (from 0). Keys are
    ``(stage, sub, src, dst)``; empty tables are left out. Accumulating gradients then
    needs no atomics: every sub-stage adds each vertex at most once.
    """
    by_recv: dict[tuple[int, int], list[tuple[int, np.ndarray]]] = {}
    for (k, s, d), ids in tables.items():
        by_recv.setdefault((k, d), []).append((s, ids))
    out: dict[SubKey, np.ndarray] = {}
    for (k, d), lst in sorted(by_recv.items()):
        lst.sort(key=lambda t: t[0])
        ids = np.concatenate([t[1] for t in lst])
        senders = np.concatenate([np.full(len(t[1]), t[0], dtype=np.int64) for t in lst])
        occ = occurrences(ids)
        for j in range(int(occ.max(initial=-1)) + 1):
            for s in np.unique(senders[occ == j]):
                sel = (occ == j) & (senders == s)
                out[(k, j, int(s), d)] = np.sort(ids[sel])
    return dict(sorted(out.items()))


def check_plan(plan: Plan, relation: Relation, max_stages: int | None = None) -> None:
    """Check that every vertex reaches each destination exactly once along a tree.

    Raises
    ------
    ValueError
        When a vertex is routed twice or not at all, a rank receives it twice, a sender
        does not hold it yet, its source receives it, a destination is missed, or a stage
        exceeds ``max_stages`` (default ``num_ranks - 1``).
    """
    limit = plan.num_ranks - 1 if max_stages is None else max_stages
    seen = np.zeros(len(relation.source), dtype=np.int64)
    ptr, lens = relation.dest_ptr, relation.num_dests
    for ids, tree in plan.routes:
        seen[ids] += 1
        srcs = np.unique(relation.source[ids])
        want = relation.dests(int(ids[0]))
        at = ptr[ids][:, None] + np.arange(len(want))
        if len(srcs) != 1 or np.any(lens[ids] != len(want)) or np.any(
            relation.dest_ranks[at] != want
        ):
            raise ValueError("a route mixes vertices of different source or destinations")
        held = {int(srcs[0]): 0}
        for k, s, d in sorted(tree):
            if k < 1 or k > limit:
                raise ValueError(f"stage {k} outside 1..{limit}")
            if s not in held or held[s] >= k:
                raise ValueError(f"rank {s} sends at stage {k} before holding the vertex")
            if d in held:
                raise ValueError(f"rank {d} receives a vertex twice (or is its source)")
            held[d] = k
        missed = set(want.tolist()) - set(held)
        if missed:
            raise ValueError(f"destinations {sorted(missed)} not reached")
    needs = lens != 0
    if np.any(seen[needs] != 1) or np.any(seen[~needs] != 0):
        raise ValueError("some vertex is routed zero or several times")

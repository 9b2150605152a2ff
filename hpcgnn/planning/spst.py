"""DGCL communication planning: stage cost model, p2p baseline and the SPST planner.

Cost model (DGCL section 5.1, plus latency): loads are counted per stage and per resource
(each directed link, each direction of each shared physical resource). A link's time in a
stage is the largest ``bytes / bandwidth`` over the resources it uses (so links through a
shared QPI or NIC contend) plus its message latency when it carries anything; the time of a
stage is the largest link time plus the topology's stage latency when anything moves; the
plan's time is the sum of stages. Every rank is a resource too (the topology's
``endpoint``, LogP's overhead): its time in a stage is one endpoint latency per message it
sends or receives plus their bytes at the endpoint bandwidth, and a stage lasts at least as
long as its busiest rank, and as the work of ranks sharing cores (a core pool) summed
over its cores. With zero latencies and no endpoint this is DGCL's model.

The planner (:func:`plan_items`) grows SPST trees on the bandwidth terms (DGCL Algorithm
2); latency decides how deep the plan goes: with latency, plans are grown with a stage
limit of 1, 2, ... and a deeper limit is kept only while its modelled time, latency
included, is lower.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from itertools import repeat

import numpy as np

from hpcgnn.errors import ConfigError
from hpcgnn.planning.plan import Edge, Plan, TableKey
from hpcgnn.planning.relation import Relation, signature_groups
from hpcgnn.planning.topology import Topology


@dataclass(frozen=True)
class Cost:
    """Modelled time of a plan.

    Attributes
    ----------
    time_s : float
        Total time, the sum of the stage times.
    stage_times : numpy.ndarray
        Time of each stage (seconds).
    link_counts : numpy.ndarray
        ``(stages, links)`` vertices carried by each directed link per stage.
    link_times : numpy.ndarray
        ``(stages, links)`` time of each link per stage: the max over its resources, plus
        its latency when it carries anything.
    resource_counts : numpy.ndarray
        ``(stages, resources)`` vertices through each resource per stage.
    endpoint_times : numpy.ndarray
        ``(stages, ranks)`` time of each rank per stage: its messages sent and received
        at the endpoint latency, their bytes at the endpoint bandwidth.
    """

    time_s: float
    stage_times: np.ndarray
    link_counts: np.ndarray
    link_times: np.ndarray
    resource_counts: np.ndarray
    endpoint_times: np.ndarray


def plan_cost(topo: Topology, plan: Plan, bytes_per_vertex: float) -> Cost:
    """Evaluate the stage cost model on a plan (see :func:`counts_cost`)."""
    return counts_cost(topo, plan.counts(), bytes_per_vertex)


def counts_cost(
    topo: Topology, counts: dict[TableKey, int], bytes_per_vertex: float
) -> Cost:
    """Evaluate the stage cost model on vertex counts per ``(stage, src, dst)``.

    An edge ``(k, a, b)`` without a direct link loads every link of ``topo.route(a, b)``
    in stage ``k`` (a hardware-routed transfer). Every busy link costs its latency
    ``topo.link_alpha_s`` once per stage (a stage's rows on a link are one message), every
    busy stage ``topo.stage_alpha_s``. Each edge is one message at both of its ends:
    ``topo.endpoint_alpha_s`` each, and its bytes at ``topo.endpoint_gbps`` at each end;
    the ranks of a core pool take at least their summed endpoint time over its cores.
    An empty ``counts`` gives one stage of time 0.
    """
    stages = max((k for k, _, _ in counts), default=1)
    nl = len(topo.links)
    links = np.zeros((stages, nl), dtype=np.int64)
    for (k, a, b), c in counts.items():
        for li in topo.route(a, b):
            links[k - 1, li] += c
    edges = np.array([(k - 1, a, b, c) for (k, a, b), c in counts.items() if c], dtype=np.int64)
    edges = edges.reshape(-1, 4)
    msgs = np.zeros((stages, topo.num_ranks))
    rows = np.zeros((stages, topo.num_ranks))
    for end in (1, 2):  # every message costs at its sender and at its receiver
        np.add.at(msgs, (edges[:, 0], edges[:, end]), 1)
        np.add.at(rows, (edges[:, 0], edges[:, end]), edges[:, 3])
    end_t = msgs * topo.endpoint_alpha_s + rows * (bytes_per_vertex / (topo.endpoint_gbps * 1e9))
    pool_t = np.zeros((stages, 1))  # ranks sharing cores: their work over their cores
    for ranks, cores in topo.core_pools:
        pool_t = np.c_[pool_t, end_t[:, list(ranks)].sum(axis=1) / cores]
    rm = topo.resource_matrix
    res = np.zeros((len(topo.resource_bw) + 1, stages), dtype=np.int64)  # + the dummy
    for col in rm.T:
        np.add.at(res, col, links.T)
    res = np.ascontiguousarray(res[:-1].T)
    sec = bytes_per_vertex / (topo.resource_bw * 1e9)
    res_t = res * sec
    link_t = np.c_[res_t, np.zeros(stages)][:, rm].max(axis=2)  # the dummy's time is 0
    link_t += (links > 0) * topo.link_alpha_s
    stage_t = np.zeros(stages)
    if nl:
        busy = links.any(axis=1)
        stage_t = np.maximum.reduce([
            res_t.max(axis=1), link_t.max(axis=1), end_t.max(axis=1), pool_t.max(axis=1)
        ])
        stage_t += busy * topo.stage_alpha_s
    return Cost(float(stage_t.sum()), stage_t, links, link_t, res, end_t)


def plan_p2p(topo: Topology, relation: Relation) -> Plan:
    """Direct plan: every vertex goes from ``s_u`` to each ``d`` in ``D_u`` in stage 1."""
    _check_ranks(topo, relation)
    plan = Plan(topo.num_ranks)
    for s, dests, ids in signature_groups(relation):
        plan.routes.append((ids, tuple((1, s, d) for d in dests)))
    return plan


#: Bytes of one vertex's row when the caller gives none: 128 float32 values.
DEFAULT_BYTES_PER_VERTEX = 512.0


def _check_ranks(topo: Topology, relation: Relation) -> None:
    if relation.parts != topo.num_ranks:
        raise ConfigError(
            f"the relation has {relation.parts} parts but topology '{topo.name}' has "
            f"{topo.num_ranks} ranks"
        )


#: Out-links per rank from which :class:`SpstPlanner` relaxes them as arrays (a rail
#: topology of 1024 ranks has 135 per rank; DGX-1 7, a 16 x 8 rail 22).
ARRAY_DEGREE = 64


#: A search state: ``(rank, depth, parent state, link)``.
State = tuple[int, int, int, int]


def _search_start(held: dict[int, int]) -> tuple[list[State], list[tuple[float, float, int]]]:
    """States and heap of a path search: every rank holding the vertex, at label 0."""
    states: list[State] = [(r, dep, -1, -1) for r, dep in held.items()]
    return states, [(0.0, 0.0, i) for i in range(len(states))]  # sorted: a heap


def _path_to(states: list[State], si: int) -> list[Edge]:
    """The edges from a start state down to state ``si``, in stage order."""
    r, _, parent, _ = states[si]
    edges = []
    while parent != -1:
        pr, pdep, pp, _ = states[parent]
        edges.append((pdep + 1, pr, r))
        r, parent = pr, pp
    return edges[::-1]


class SpstPlanner:
    """Greedy shortest-path spanning trees (DGCL Algorithm 1).

    Edge weights are incremental costs (Algorithm 2) on the stage cost model.

    Parameters
    ----------
    topo : Topology
        Communication topology; trees use its direct links only.
    max_stages : int, optional
        Deepest stage allowed (default ``num_ranks - 1``, the bound of any tree).
    """

    def __init__(self, topo: Topology, max_stages: int | None = None) -> None:
        self.topo = topo
        self.stages = topo.num_ranks - 1 if max_stages is None else max_stages
        if self.stages < 1:
            raise ConfigError(f"max stages must be >= 1, got {self.stages}")
        self.res = topo.resource_matrix
        self.inv_bw = np.r_[1.0 / topo.resource_bw, 0.0]  # seconds per vertex-GB; dummy 0
        self.loads = np.zeros((self.stages, len(self.inv_bw)))
        self.depth = 0  # deepest stage with load; the stages after it are all empty
        self.out: list[list[tuple[int, int]]] = [[] for _ in range(topo.num_ranks)]
        for e, ln in enumerate(topo.links):
            self.out[ln.src].append((e, ln.dst))
        raw = (self.inv_bw[self.res]).max(axis=1)
        self.raw = raw.tolist()
        self.arrays = max(map(len, self.out), default=0) >= ARRAY_DEGREE
        if self.arrays:  # per rank: out-links, their heads, resources, 1/bw, raw time
            self.out_arrays = []
            for r in range(topo.num_ranks):
                li = np.array([e for e, _ in self.out[r]], dtype=np.int64)
                res = self.res[li]
                self.out_arrays.append(
                    (li, np.array([b for _, b in self.out[r]], dtype=np.int64), res,
                     self.inv_bw[res], raw[li]))

    def _cost_row(self, dep: int, count: int) -> list[float]:
        """Algorithm 2 for the links leaving depth ``dep`` (used at stage ``dep + 1``).

        ``C[e]`` is the increase of the stage's time when ``count`` vertices use link
        ``e``. Every stage after :attr:`depth` is empty and has the same row.
        """
        loads = self.loads[min(dep, self.depth)]
        stage_t = (loads * self.inv_bw).max()
        new = ((loads[self.res] + count) * self.inv_bw[self.res]).max(axis=1)
        return (np.maximum(new, stage_t) - stage_t).tolist()

    def _path(self, held: dict[int, int], targets: set[int], count: int) -> list[Edge]:
        """Cheapest path from a rank holding the vertex to a target.

        Multi-source Dijkstra over ``(rank, depth)`` states (an edge leaving depth ``i``
        is used at stage ``i + 1``); ties are broken by the raw transfer time. Edge
        weights are Algorithm 2's incremental costs (:meth:`_cost_row`), computed for a
        depth when a state there is first expanded. A label not below the best one pushed
        for a target is not pushed: it would pop after that target.

        With many out-links per rank (:data:`ARRAY_DEGREE`) the search runs as
        :meth:`_path_arrays`, which relaxes them with NumPy; both give the same path.
        """
        if self.arrays:
            return self._path_arrays(held, targets, count)
        rows: dict[int, list[float]] = {}
        bound = (math.inf, math.inf)  # best label pushed for a target
        states, heap = _search_start(held)
        done: set[tuple[int, int]] = set()
        best: dict[tuple[int, int], tuple[float, float]] = {}
        while heap:
            c, raw, si = heapq.heappop(heap)
            r, dep, parent, _ = states[si]
            if (r, dep) in done:
                continue
            done.add((r, dep))
            if r in targets and parent != -1:
                return _path_to(states, si)
            if dep >= self.stages:
                continue
            chain = set()
            x = si
            while x != -1:
                chain.add(states[x][0])
                x = states[x][2]
            at = min(dep, self.depth)  # the empty stages share one row
            row = rows.get(at)
            if row is None:
                row = rows[at] = self._cost_row(dep, count)
            nxt = dep + 1
            for li, nb in self.out[r]:
                key = (nb, nxt)
                if nb in held or nb in chain or key in done:
                    continue
                label = (c + row[li], raw + self.raw[li])
                if label >= bound or (key in best and best[key] <= label):
                    continue
                best[key] = label
                states.append((nb, nxt, si, li))
                heapq.heappush(heap, (label[0], label[1], len(states) - 1))
                if nb in targets:
                    bound = label
        raise self._no_route()

    def _path_arrays(
        self, held: dict[int, int], targets: set[int], count: int
    ) -> list[Edge]:
        """:meth:`_path` relaxing the out-links of a state as arrays (many per rank).

        The same search, pushes and result as :meth:`_path`; an out-link's cost is computed
        when its state is expanded (in a stage after :attr:`depth`, empty, it is ``count``
        times the raw time), and the held, settled, chain, best-label and bound tests are
        array masks over the state's out-links.
        """
        n = self.topo.num_ranks
        is_target = np.zeros(n, dtype=bool)
        is_target[list(targets)] = True
        # per depth: ranks settled there or held (never entered), best labels
        closed: dict[int, np.ndarray] = {}
        best: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        on_chain = np.full(n, -1, dtype=np.int64)  # state whose chain marked the rank
        bound_c, bound_raw = math.inf, math.inf  # best label pushed for a target
        stage_t: dict[int, float] = {}  # time of a stage with load, before this path
        states, heap = _search_start(held)
        settled: set[tuple[int, int]] = set()
        while heap:
            c, raw, si = heapq.heappop(heap)
            r, dep, parent, _ = states[si]
            if (r, dep) in settled:
                continue
            settled.add((r, dep))
            if dep in closed:
                closed[dep][r] = True
            if parent != -1 and r in targets:
                return _path_to(states, si)
            if dep >= self.stages:
                continue
            x = si
            while x != -1:
                on_chain[states[x][0]] = si
                x = states[x][2]
            li, nb, res, inv, raw_t = self.out_arrays[r]
            if dep < self.depth:  # a stage with load
                loads = self.loads[dep]
                st = stage_t.get(dep)
                if st is None:
                    st = stage_t[dep] = float((loads * self.inv_bw).max())
                new = ((loads[res] + count) * inv).max(axis=1)
                label_c = c + (np.maximum(new, st) - st)
            else:
                label_c = c + count * raw_t
            label_raw = raw + raw_t
            nxt = dep + 1
            if nxt not in best:
                best[nxt] = (np.full(n, np.inf), np.full(n, np.inf))
                shut = closed[nxt] = np.zeros(n, dtype=bool)
                shut[list(held)] = True
                shut[[x for x, d in settled if d == nxt]] = True
            best_c, best_raw = best[nxt]
            bc, br = best_c[nb], best_raw[nb]
            keep = (((label_c < bc) | ((label_c == bc) & (label_raw < br)))
                    & ~closed[nxt][nb] & (on_chain[nb] != si)
                    & ((label_c < bound_c) | ((label_c == bound_c) & (label_raw < bound_raw))))
            if not keep.any():
                continue
            nb, li, label_c, label_raw = nb[keep], li[keep], label_c[keep], label_raw[keep]
            best_c[nb], best_raw[nb] = label_c, label_raw
            hit = is_target[nb]
            if hit.any():
                t_c, t_raw = label_c[hit], label_raw[hit]
                i = np.lexsort((t_raw, t_c))[0]
                if (t_c[i], t_raw[i]) < (bound_c, bound_raw):
                    bound_c, bound_raw = float(t_c[i]), float(t_raw[i])
            first = len(states)
            states += zip(nb.tolist(), repeat(nxt), repeat(si), li.tolist())
            for entry in zip(label_c.tolist(), label_raw.tolist(), range(first, len(states)),
                             strict=True):
                heapq.heappush(heap, entry)
        raise self._no_route()

    def _no_route(self) -> ConfigError:
        return ConfigError(
            f"no route within {self.stages} stages; raise --max-stages (at most "
            f"{self.topo.num_ranks - 1} are ever needed)"
        )

    def tree(self, source: int, dests: tuple[int, ...], count: int) -> tuple[Edge, ...]:
        """Grow the tree of ``count`` vertices sharing ``(source, dests)``; update loads."""
        held = {source: 0}
        targets = set(dests) - {source}
        edges: list[Edge] = []
        while targets:
            path = self._path(held, targets, count)
            for k, a, b in path:
                li = self.topo.link_id(a, b)
                self.loads[k - 1, self.res[li]] += count
                self.depth = max(self.depth, k)
                held[b] = k
                targets.discard(b)
            edges += path
        return tuple(edges)


WorkItem = tuple[int, tuple[int, ...], int]
"""``(source, destinations, count)``: ``count`` vertices of ``source`` that share a tree."""


def chunk_sizes(n: int, chunks: int | None) -> list[int]:
    """Sizes of the chunks a group of ``n`` vertices is cut into.

    Chunks of ``ceil(n / chunks)`` vertices (the last one may be smaller); ``None``: one
    vertex per chunk.
    """
    size = 1 if chunks is None else max(1, math.ceil(n / chunks))
    return [min(size, n - a) for a in range(0, n, size)]


def plan_trees(
    topo: Topology,
    items: list[WorkItem],
    *,
    seed: int | np.random.Generator = 0,
    max_stages: int | None = None,
) -> list[tuple[Edge, ...]]:
    """Plan one SPST tree per work item, from counts only.

    Parameters
    ----------
    topo
        Communication topology.
    items
        ``(source, dests, count)`` per work item (a chunk of vertices sharing a tree).
    seed
        Seed (or generator) of the random processing order.
    max_stages
        Deepest stage allowed (default ``num_ranks - 1``).

    Returns
    -------
    list of tuple of Edge
        The ``(stage, src, dst)`` tree of every item, in item order.
    """
    return _grow(topo, items, np.random.default_rng(seed).permutation(len(items)), max_stages)


def _grow(
    topo: Topology, items: list[WorkItem], order: np.ndarray, max_stages: int | None
) -> list[tuple[Edge, ...]]:
    """SPST trees of ``items``, planned in ``order`` (see :func:`plan_trees`)."""
    planner = SpstPlanner(topo, max_stages)
    trees: list[tuple[Edge, ...]] = [()] * len(items)
    for i in order:
        s, dests, count = items[i]
        trees[i] = planner.tree(s, dests, count)
    return trees


def direct_trees(items: list[WorkItem]) -> list[tuple[Edge, ...]]:
    """The p2p trees: every item goes from its source to each destination in stage 1."""
    return [tuple((1, s, d) for d in dests if d != s) for s, dests, _ in items]


def tree_counts(
    items: list[WorkItem], trees: list[tuple[Edge, ...]]
) -> dict[TableKey, int]:
    """Vertices per ``(stage, src, dst)`` of the items' trees (sorted by key)."""
    out: dict[TableKey, int] = {}
    for (_, _, count), tree in zip(items, trees, strict=True):
        for e in tree:
            out[e] = out.get(e, 0) + count
    return dict(sorted(out.items()))


def plan_items(
    topo: Topology,
    items: list[WorkItem],
    *,
    seed: int | np.random.Generator = 0,
    max_stages: int | None = None,
    fallback: bool = True,
    bytes_per_vertex: float = DEFAULT_BYTES_PER_VERTEX,
) -> tuple[list[tuple[Edge, ...]], bool]:
    """SPST trees of ``items`` (:func:`plan_trees`), or the direct ones when cheaper.

    Plans are compared on :func:`counts_cost` at ``bytes_per_vertex``. Without latency in
    ``topo`` one SPST plan is grown with the stage limit ``max_stages``. With latency the
    limit goes 1, 2, ... up to ``max_stages``, all in the same item order, and stops at the
    first limit whose plan is not faster than the previous one's (or does not use all its
    stages); the fastest plan is kept, so a stage is added only when it pays. With
    ``fallback`` the direct plan is returned when its modelled time is lower (with
    latency: not higher).

    Returns
    -------
    trees : list of tuple of Edge
        One tree per item, in item order.
    direct : bool
        True when ``fallback`` chose the direct plan (its modelled time is lower).
    """
    order = np.random.default_rng(seed).permutation(len(items))
    limit = topo.num_ranks - 1 if max_stages is None else max_stages
    latency = (
        bool(topo.link_alpha_s.any()) or topo.stage_alpha_s > 0 or topo.endpoint_alpha_s > 0
    )
    best_t, trees = math.inf, None
    for m in range(1, limit + 1) if latency else [limit]:
        try:
            cand = _grow(topo, items, order, m)
        except ConfigError:  # no route within m stages: try a deeper limit
            if m == limit:
                raise
            continue
        t = counts_cost(topo, tree_counts(items, cand), bytes_per_vertex).time_s
        if t >= best_t:
            break
        best_t, trees = t, cand
        if max((k for tree in cand for k, _, _ in tree), default=0) < m:
            break
    assert trees is not None
    if fallback:
        direct = direct_trees(items)
        t_direct = counts_cost(topo, tree_counts(items, direct), bytes_per_vertex).time_s
        # a tie keeps DGCL's plan without latency (as before), goes to p2p with it
        if t_direct < best_t or (latency and t_direct == best_t):
            return direct, True
    return trees, False


def plan_spst(
    topo: Topology,
    relation: Relation,
    *,
    seed: int = 0,
    chunks: int | None = 64,
    max_stages: int | None = None,
    fallback: bool = True,
    bytes_per_vertex: float = DEFAULT_BYTES_PER_VERTEX,
) -> Plan:
    """Plan with SPST.

    Vertices with the same ``(s_u, D_u)`` form a group; each group is cut into ``chunks``
    near-equal chunks (``None``: one vertex per chunk, the exact per-vertex algorithm).
    Chunks of all groups are planned in a seeded random order; a chunk of ``c`` vertices
    takes one tree chosen with the incremental cost of adding ``c`` vertices
    (:func:`plan_trees`).

    SPST is greedy and may, rarely, end above the direct plan; with ``fallback`` the
    direct plan (:func:`plan_p2p`) is returned when it is faster (:func:`plan_items`).
    With latency in ``topo`` the depth is chosen as :func:`plan_items` says, at
    ``bytes_per_vertex``.
    """
    _check_ranks(topo, relation)
    rng = np.random.default_rng(seed)
    chunk_ids: list[np.ndarray] = []
    items: list[WorkItem] = []
    for s, dests, ids in signature_groups(relation):
        ids = rng.permutation(ids)
        a = 0
        for c in chunk_sizes(len(ids), chunks):
            chunk_ids.append(ids[a : a + c])
            items.append((s, dests, c))
            a += c
    trees, direct = plan_items(
        topo, items, seed=rng, max_stages=max_stages, fallback=fallback,
        bytes_per_vertex=bytes_per_vertex,
    )
    if direct:
        return plan_p2p(topo, relation)
    return Plan(topo.num_ranks, list(zip(chunk_ids, trees, strict=True)))

"""Communication topologies: ranks, nodes, links with bandwidths, shared physical resources.

A topology file is JSON (see ``docs/planning.md``)::

    {"name": "dgx1", "ranks": 8,
     "nodes": [{"name": "cpu0", "ranks": [0, 1, 2, 3]}, ...],
     "shared": [{"name": "qpi", "node": "cpu0", "bandwidth_gbps": 8.0}, ...],
     "links": [{"a": 0, "b": 1, "bandwidth_gbps": 25.0, "kind": "nvlink"},
               {"a": 0, "b": 5, "bandwidth_gbps": 10.0, "kind": "pcie-qpi", "via": ["qpi"]}],
     "alpha_us": {"nvlink": 3.0, "pcie-qpi": 8.0}, "stage_alpha_us": 10.0,
     "endpoint": {"alpha_us": 2.0, "bandwidth_gbps": 12.0}}

Links are undirected; each direction is its own link with its own capacity. Bandwidths are
in GB/s (10^9 bytes per second). A link may pass through shared resources (``via``): a
shared resource belongs to a node and is full duplex; traffic of a link leaving that node
loads its "out" direction, traffic entering it its "in" direction, and every link through
it in the same direction and stage competes for its bandwidth. A resource marked
``"within": true`` (a PCIe switch, a socket's memory bus: what ``plan --calibrate`` infers
from pairs measured at once, :mod:`hpcgnn.planning.contention`) may also carry links with
both ends in its node; such a link loads its "out" direction, so all the traffic inside
the node through it shares that one capacity.

A node may name its ``host`` (the machine; default: the node's own name): the CPU sockets
of one server are nodes of one host. With it, each pair's method follows (DGCL section
6.2, :mod:`hpcgnn.planning.methods`): ``ipc`` inside a node, ``host-staged`` between
nodes of one host, ``nic`` between hosts; a link may name its own ``method``.

Latencies, in microseconds: ``alpha_us`` maps a link kind to the latency of one message on
a link of that kind (a link may override it with its own ``alpha_us``; kinds not listed get
:data:`DEFAULT_LINK_ALPHA_US`), and ``stage_alpha_us`` is the fixed cost of running a stage
at all (default :data:`DEFAULT_STAGE_ALPHA_US`). Zero latencies give DGCL's bandwidth-only
cost model.

``endpoint`` (optional) describes every rank as a resource of its own (LogP's overhead
``o``): ``alpha_us`` is the time a rank with a core to itself spends on each message it
sends or receives, one after the other, and ``bandwidth_gbps`` the rate at which it moves
the bytes of all of them (packing, copying through the MPI library). Links in parallel do
not hide it: a rank that talks to many peers in one stage pays for every message.
``core_pools`` (optional) lists ranks that share CPU cores (``{"ranks": [...], "cores":
C}``, e.g. the ranks of one host): their endpoint work in a stage takes at least its sum
over ``C`` cores. Absent, the endpoint costs nothing (DGCL's model). ``hpcgnn plan
--calibrate`` measures it (:mod:`hpcgnn.comm.calibrate`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from hpcgnn.errors import ConfigError, InputError
from hpcgnn.planning.contention import PairTiming, SharedBus
from hpcgnn.planning.methods import PAIR_METHODS
from hpcgnn.utils.json_text import read_json
from hpcgnn.utils.shipped import shipped_dir
from hpcgnn.utils.text import printable

#: The shipped topology files (``configs/topologies`` of a checkout, or a wheel's copy).
TOPOLOGIES_DIR = shipped_dir("configs", "*.json") / "topologies"

#: Latency of one message on a link whose kind has no ``alpha_us`` (microseconds): about a
#: GPU peer copy or an MPI message between processes of one node.
DEFAULT_LINK_ALPHA_US = 0.0
#: Fixed cost of one stage (microseconds): the peers' ready/done handshake of a stage.
DEFAULT_STAGE_ALPHA_US = 0.0
#: Latency of one message on the links of the default topology (:func:`uniform_topology`,
#: microseconds): the intra-node ``alpha`` of ``configs/machines/laptop.json``, the machine
#: ``hpcgnn model`` assumes by default. With it a plan forwards a row through another rank
#: only where the model says the extra stage pays; without latency SPST would forward rows
#: to balance the links' bytes even where sending them directly moves fewer.
UNIFORM_ALPHA_US = 2.0


@dataclass(frozen=True)
class Link:
    """One direction of a topology link."""

    src: int
    dst: int
    bandwidth_gbps: float
    kind: str
    method: str | None = None


@dataclass(frozen=True)
class Topology:
    """A validated communication topology.

    Attributes
    ----------
    name : str
        Name from the file.
    num_ranks : int
        Number of ranks (GPUs), ``0..num_ranks-1``.
    node_of : tuple of int
        Node index of every rank.
    node_names : tuple of str
        Node names.
    links : tuple of Link
        Directed links (two per undirected link in the file).
    resource_names : tuple of str
        Names of every capacity: first one per directed link (``"a->b"``), then the two
        directions of every shared resource (``"qpi:out"``, ``"qpi:in"``).
    resource_bw : numpy.ndarray
        Bandwidth of every resource in GB/s.
    link_resources : tuple of tuple of int
        Resources each directed link loads (itself first).
    resource_matrix : numpy.ndarray
        ``link_resources`` as a ``(links, width)`` array padded with ``len(resource_bw)``
        (derived, not a constructor argument).
    link_alpha_s : numpy.ndarray
        Latency of one message on each directed link (seconds).
    stage_alpha_s : float
        Fixed cost of a stage that moves anything (seconds).
    endpoint_alpha_s : float
        Time a rank spends on each message it sends or receives in a stage (seconds).
    endpoint_gbps : float
        Rate at which a rank moves the bytes it sends and receives (GB/s; ``inf``: free).
    core_pools : tuple of (tuple of int, float)
        Ranks sharing CPU cores and the number of cores they share.
    node_hosts : tuple of str
        Host (machine) of every node: a node's own name unless the file gives ``host``
        (the CPU sockets of one server are nodes of one host). Empty: every node its own.
    """

    name: str
    num_ranks: int
    node_of: tuple[int, ...]
    node_names: tuple[str, ...]
    links: tuple[Link, ...]
    resource_names: tuple[str, ...]
    resource_bw: np.ndarray
    link_resources: tuple[tuple[int, ...], ...]
    link_alpha_s: np.ndarray
    stage_alpha_s: float
    endpoint_alpha_s: float = 0.0
    endpoint_gbps: float = math.inf
    core_pools: tuple[tuple[tuple[int, ...], float], ...] = ()
    node_hosts: tuple[str, ...] = ()
    _index: dict[tuple[int, int], int] = field(repr=False, default_factory=dict)
    _adj: sp.csr_matrix | None = field(repr=False, default=None)
    _trees: dict[int, np.ndarray] = field(repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        sizes = np.fromiter(map(len, self.link_resources), dtype=np.int64,
                            count=len(self.link_resources))
        rm = np.full((len(sizes), max(sizes, default=1)), len(self.resource_bw), dtype=np.int64)
        rows = np.repeat(np.arange(len(sizes)), sizes)
        cols = np.arange(len(rows)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        rm[rows, cols] = np.fromiter(chain.from_iterable(self.link_resources), dtype=np.int64,
                                     count=len(rows))
        object.__setattr__(self, "resource_matrix", rm)

    resource_matrix: np.ndarray = field(init=False, repr=False, compare=False)

    def link_id(self, a: int, b: int) -> int | None:
        """Index of the direct link ``a -> b``, or ``None`` when there is none."""
        return self._index.get((a, b))

    def route(self, a: int, b: int) -> tuple[int, ...]:
        """Links of the route ``a -> b``: the direct link, else the fewest-hop path.

        The path is the one of a breadth-first search from ``a`` that visits neighbours in
        ascending order; the search tree of ``a`` is built on the first route from ``a``
        and kept, so ``K`` ranks never hold all ``K (K - 1)`` routes.
        """
        li = self._index.get((a, b))
        if li is not None:
            return (li,)
        prev = self._trees.get(a)
        if prev is None:
            prev = self._trees[a] = _bfs_tree(self._adj, a)
        hops = []
        while b != a:
            p = int(prev[b])
            hops.append(self._index[(p, b)])
            b = p
        return tuple(reversed(hops))


def _adjacency(n: int, links: list[Link]) -> sp.csr_matrix:
    """``(n, n)`` CSR adjacency of the directed links, indices sorted."""
    src = np.fromiter((ln.src for ln in links), dtype=np.int64, count=len(links))
    dst = np.fromiter((ln.dst for ln in links), dtype=np.int64, count=len(links))
    adj = sp.csr_matrix((np.ones(len(links), dtype=np.int8), (src, dst)), shape=(n, n))
    adj.sort_indices()
    return adj


def _bfs_tree(adj: sp.csr_matrix, source: int) -> np.ndarray:
    """Predecessor of every rank in the breadth-first tree from ``source`` (< 0: none).

    Neighbours are visited in ascending order (sorted CSR indices), so the first rank to
    reach another is its predecessor, as in a FIFO search over sorted adjacency lists.
    """
    return breadth_first_order(adj, source, directed=True, return_predecessors=True)[1]


def _bad(path: str, msg: str) -> InputError:
    """The error of a topology file; its names are data, escaped (never printed raw)."""
    return InputError(printable(f"topology {path}: {msg}"))


def _int(path: str, value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(path, f"{what} must be an integer, got {value!r}")
    return value


def _latency(path: str, value: object, what: str) -> float:
    """A latency in microseconds from the file, as seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(path, f"{what} must be a number of microseconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise _bad(path, f"{what} must be finite and >= 0, got {value!r}")
    return float(value) * 1e-6


def _bandwidth(path: str, value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(path, f"{what} has no numeric bandwidth_gbps (got {value!r})")
    if not math.isfinite(value) or value <= 0:
        raise _bad(path, f"{what} has non-positive or non-finite bandwidth {value!r}")
    return float(value)


def _core_pools(
    path: str, raw: object, n: int
) -> tuple[tuple[tuple[int, ...], float], ...]:
    """The ``endpoint.core_pools`` of a file: disjoint rank sets, each with its cores."""
    if not isinstance(raw, list):
        raise _bad(path, "endpoint 'core_pools' must be a list")
    pools, seen = [], set()
    for i, pool in enumerate(raw):
        if not isinstance(pool, dict) or not isinstance(pool.get("ranks"), list):
            raise _bad(path, f"core pool {i} needs 'ranks' (a list) and 'cores'")
        cores = pool.get("cores")
        if isinstance(cores, bool) or not isinstance(cores, (int, float)) or not (
            math.isfinite(cores) and cores > 0
        ):
            raise _bad(path, f"core pool {i}: 'cores' must be a positive number, got {cores!r}")
        ranks = tuple(_int(path, r, f"core pool {i} rank") for r in pool["ranks"])
        for r in ranks:
            if not 0 <= r < n or r in seen:
                raise _bad(path, f"core pool {i} lists rank {r}: unknown or in another pool")
            seen.add(r)
        pools.append((ranks, float(cores)))
    return tuple(pools)


def load_topology(path: str | os.PathLike, ranks: int | None = None) -> Topology:
    """Read and validate a topology JSON file.

    Parameters
    ----------
    path
        The JSON file, or the name of a shipped one (``dgx1``: ``configs/topologies/
        dgx1.json``, as ``--machine`` takes a name).
    ranks
        The number of ranks the caller needs (the job's size, ``--parts``), or ``None``;
        a file declaring another number is refused before anything is built per rank.

    Raises
    ------
    InputError
        One line naming the problem: unreadable file, bad JSON, missing field, a rank
        count other than ``ranks``, rank missing from the nodes, link to an unknown rank,
        non-positive bandwidth, negative or non-numeric latency, unknown shared resource,
        or a topology that is not connected.
    """
    p = os.fspath(path)
    if not p.endswith(".json") and os.sep not in p and not os.path.exists(p):
        known = sorted(f.stem for f in TOPOLOGIES_DIR.glob("*.json"))
        if p not in known:
            raise InputError(printable(f"unknown topology '{p}' (known: "
                                       f"{', '.join(known) or 'none'}; or pass a .json file)"))
        p = str(TOPOLOGIES_DIR / f"{p}.json")
    try:
        doc = read_json(p)
    except ValueError as err:
        raise _bad(p, str(err)) from None
    return parse_topology(doc, p, ranks)


def parse_topology(doc: object, path: str = "<dict>", ranks: int | None = None) -> Topology:
    """Validate an already parsed topology document (see :func:`load_topology`)."""
    if not isinstance(doc, dict):
        raise _bad(path, "top level must be a JSON object")
    if "ranks" not in doc:
        raise _bad(path, "missing field 'ranks'")
    n = _int(path, doc["ranks"], "'ranks'")
    if n < 1:
        raise _bad(path, f"'ranks' must be >= 1, got {n}")
    if ranks is not None and n != ranks:
        raise _bad(path, f"has {n} ranks but the job has {ranks}")
    name = printable(str(doc.get("name", os.path.basename(path))))

    nodes = doc.get("nodes", [{"name": f"rank{r}", "ranks": [r]} for r in range(n)])
    if not isinstance(nodes, list) or not nodes:
        raise _bad(path, "'nodes' must be a non-empty list")
    node_of = [-1] * n
    node_names: list[str] = []
    node_hosts: list[str] = []
    for i, nd in enumerate(nodes):
        if not isinstance(nd, dict) or "name" not in nd or "ranks" not in nd:
            raise _bad(path, f"node {i} needs 'name' and 'ranks'")
        nm = str(nd["name"])
        if nm in node_names:
            raise _bad(path, f"node name '{nm}' appears twice")
        node_names.append(nm)
        node_hosts.append(str(nd.get("host", nm)))
        if not isinstance(nd["ranks"], list):
            raise _bad(path, f"node '{nm}': 'ranks' must be a list")
        for r in nd["ranks"]:
            r = _int(path, r, f"node '{nm}' rank")
            if not 0 <= r < n:
                raise _bad(path, f"node '{nm}' lists unknown rank {r} (ranks are 0..{n - 1})")
            if node_of[r] != -1:
                raise _bad(path, f"rank {r} is in two nodes")
            node_of[r] = i
    missing = [r for r in range(n) if node_of[r] == -1]
    if missing:
        raise _bad(path, f"rank {missing[0]} is in no node ({len(missing)} rank(s) missing)")

    shared = doc.get("shared", [])
    if not isinstance(shared, list):
        raise _bad(path, "'shared' must be a list")
    shared_idx: dict[str, tuple[int, int, float]] = {}
    within: set[str] = set()  # resources that carry traffic inside their node too
    for i, sh in enumerate(shared):
        if not isinstance(sh, dict) or "name" not in sh:
            raise _bad(path, f"shared resource {i} needs a 'name'")
        nm = str(sh["name"])
        if nm in shared_idx:
            raise _bad(path, f"shared resource '{nm}' appears twice")
        node = sh.get("node")
        if node not in node_names:
            raise _bad(path, f"shared resource '{nm}' refers to unknown node {node!r}")
        bw = _bandwidth(path, sh.get("bandwidth_gbps"), f"shared resource '{nm}'")
        shared_idx[nm] = (len(shared_idx), node_names.index(node), bw)
        if not isinstance(sh.get("within", False), bool):
            raise _bad(path, f"shared resource '{nm}': 'within' must be true or false")
        if sh.get("within", False):
            within.add(nm)

    kind_alpha = doc.get("alpha_us", {})
    if not isinstance(kind_alpha, dict):
        raise _bad(path, "'alpha_us' must map link kinds to microseconds")
    kind_alpha = {
        str(k): _latency(path, v, f"alpha_us of kind '{k}'") for k, v in kind_alpha.items()
    }
    stage_alpha = _latency(
        path, doc.get("stage_alpha_us", DEFAULT_STAGE_ALPHA_US), "'stage_alpha_us'"
    )

    endpoint = doc.get("endpoint", {})
    if not isinstance(endpoint, dict):
        raise _bad(path, "'endpoint' must be an object with 'alpha_us' and 'bandwidth_gbps'")
    endpoint_alpha = _latency(path, endpoint.get("alpha_us", 0.0), "endpoint 'alpha_us'")
    endpoint_gbps = (
        _bandwidth(path, endpoint["bandwidth_gbps"], "'endpoint'")
        if "bandwidth_gbps" in endpoint else math.inf
    )
    pools = _core_pools(path, endpoint.get("core_pools", []), n)

    raw_links = doc.get("links")
    if not isinstance(raw_links, list) or (not raw_links and n > 1):
        raise _bad(path, "'links' must be a non-empty list (may be empty for 1 rank)")
    links: list[Link] = []
    vias: list[list[str]] = []
    alphas: list[float] = []
    index: dict[tuple[int, int], int] = {}
    for i, ln in enumerate(raw_links):
        if not isinstance(ln, dict) or "a" not in ln or "b" not in ln:
            raise _bad(path, f"link {i} needs 'a' and 'b'")
        a = _int(path, ln["a"], f"link {i} 'a'")
        b = _int(path, ln["b"], f"link {i} 'b'")
        for r in (a, b):
            if not 0 <= r < n:
                raise _bad(path, f"link {i} ({a}-{b}) refers to unknown rank {r}")
        if a == b:
            raise _bad(path, f"link {i} connects rank {a} to itself")
        if (a, b) in index:
            raise _bad(path, f"link {a}-{b} appears twice")
        bw = _bandwidth(path, ln.get("bandwidth_gbps"), f"link {i} ({a}-{b})")
        via = ln.get("via", [])
        if not isinstance(via, list):
            raise _bad(path, f"link {i} ({a}-{b}): 'via' must be a list")
        for v in via:
            if v not in shared_idx:
                raise _bad(path, f"link {i} ({a}-{b}) goes via unknown shared resource {v!r}")
            node = shared_idx[v][1]
            ends = (node_of[a] == node) + (node_of[b] == node)
            if ends != 1 and not (ends == 2 and v in within):
                raise _bad(
                    path,
                    f"link {i} ({a}-{b}) goes via '{v}' but does not have exactly one "
                    f"end in its node '{node_names[node]}'"
                    + (" (or both: it is 'within')" if v in within else ""),
                )
        method = ln.get("method")
        if method is not None and method not in PAIR_METHODS:
            raise _bad(path, f"link {i} ({a}-{b}): method {method!r} is not one of "
                             f"{', '.join(PAIR_METHODS)}")
        kind = str(ln.get("kind", "link"))
        alpha = kind_alpha.get(kind, DEFAULT_LINK_ALPHA_US * 1e-6)
        if "alpha_us" in ln:
            alpha = _latency(path, ln["alpha_us"], f"link {i} ({a}-{b}) alpha_us")
        for s, d in ((a, b), (b, a)):
            index[(s, d)] = len(links)
            links.append(Link(s, d, bw, kind, method))
            alphas.append(alpha)
            vias.append([str(v) for v in via])

    # connectivity: every link goes both ways, so one search from rank 0 sees it all
    adj = _adjacency(n, links)
    tree0 = _bfs_tree(adj, 0)
    unreached = [r for r in range(1, n) if tree0[r] < 0]
    if unreached:
        raise _bad(path, f"not connected: rank(s) {unreached[:8]} unreachable from rank 0")

    names = [f"{ln.src}->{ln.dst}" for ln in links]
    bws = [ln.bandwidth_gbps for ln in links]
    for nm, (_, _, bw) in shared_idx.items():
        names += [f"{nm}:out", f"{nm}:in"]
        bws += [bw, bw]
    link_res = []
    for li, ln in enumerate(links):
        res = [li]
        for v in vias[li]:
            k, node, _ = shared_idx[v]
            direction = 0 if node_of[ln.src] == node else 1  # inside ('within'): out
            res.append(len(links) + 2 * k + direction)
        link_res.append(tuple(res))
    return Topology(
        name=name,
        num_ranks=n,
        node_of=tuple(node_of),
        node_names=tuple(node_names),
        links=tuple(links),
        resource_names=tuple(names),
        resource_bw=np.asarray(bws, dtype=np.float64),
        link_resources=tuple(link_res),
        link_alpha_s=np.asarray(alphas, dtype=np.float64),
        stage_alpha_s=stage_alpha,
        endpoint_alpha_s=endpoint_alpha,
        endpoint_gbps=endpoint_gbps,
        core_pools=pools,
        node_hosts=tuple(node_hosts),
        _index=index,
        _adj=adj,
        _trees={0: tree0},
    )


def uniform_topology(num_ranks: int, bandwidth_gbps: float = 25.0) -> Topology:
    """All ranks on one node, a direct link of ``bandwidth_gbps`` between every pair.

    The default when no topology file is given; one rank gives a topology without links.
    Every link has the latency :data:`UNIFORM_ALPHA_US`, and so has a stage (its peers'
    ready/done handshake is a message too), so a plan adds a stage only where the rows it
    forwards save more than one message's latency.
    """
    return parse_topology(
        {
            "name": f"uniform-{num_ranks}",
            "ranks": num_ranks,
            "stage_alpha_us": UNIFORM_ALPHA_US,
            "nodes": [{"name": "node0", "ranks": list(range(num_ranks))}],
            "links": [
                {"a": a, "b": b, "bandwidth_gbps": bandwidth_gbps, "kind": "uniform",
                 "alpha_us": UNIFORM_ALPHA_US}
                for a in range(num_ranks)
                for b in range(a + 1, num_ranks)
            ],
        },
        f"<uniform {num_ranks}>",
    )


def measured_topology(
    name: str, hosts: list[str], pairs: dict[tuple[int, int], tuple[float, float]],
    stage_alpha_s: float, source: str = "", endpoint: tuple[float, float] | None = None,
    cores: dict[str, int] | None = None, nics: dict[str, float] | None = None,
    buses: list[SharedBus] | None = None, contention: list[PairTiming] | None = None,
) -> dict:
    """A topology document from measured latencies and bandwidths (``plan --calibrate``).

    Parameters
    ----------
    name
        The topology's name.
    hosts
        Host of every rank: ranks of one host form a node.
    pairs
        ``(a, b) -> (alpha_s, beta_s_per_byte)`` for every pair of ranks ``a < b``.
    stage_alpha_s
        The fixed cost of a stage (seconds).
    source
        How it was measured (kept in the ``description``).
    endpoint
        ``(alpha_s, beta_s_per_byte)`` of every rank as an endpoint with a core to itself,
        or ``None``.
    cores
        Cores each host's ranks share (by host name), written as the endpoint's
        ``core_pools``.
    nics
        Bytes per second out of each host with all its ranks talking to other hosts
        (:func:`hpcgnn.comm.calibrate.host_links`): a shared resource ``nic-<host>`` of
        the host, which every inter-node link passes through at both ends.
    buses
        Resources inside a host that some of its pairs share
        (:func:`hpcgnn.planning.contention.shared_buses`): each a ``within`` shared
        resource ``bus-<host>-<i>`` of the host at its measured bytes per second, which
        the links of its pairs pass through.
    contention
        The pairs timed alone and two at once that ``buses`` were inferred from, kept
        in the document's ``contention`` list (``[]``: measured, none to time).

    Returns
    -------
    dict
        Every pair linked directly (``kind`` ``intra-node`` or ``inter-node``) with its own
        ``bandwidth_gbps`` (``1 / beta``) and ``alpha_us``; ``alpha_us`` per kind is the
        median of its links. :func:`parse_topology` reads it back.
    """
    names = list(dict.fromkeys(hosts))
    bus_via: dict[tuple[int, int], list[str]] = {}  # the buses each pair's link goes through
    for i, bus in enumerate(buses or []):
        for pair in bus.pairs:
            bus_via.setdefault(pair, []).append(f"bus-{bus.host}-{i}")
    links: list[dict[str, object]] = []
    by_kind: dict[str, list[float]] = {}
    for (a, b), (alpha, beta) in sorted(pairs.items()):
        kind = "intra-node" if hosts[a] == hosts[b] else "inter-node"
        by_kind.setdefault(kind, []).append(alpha * 1e6)
        link: dict[str, object] = {"a": a, "b": b, "kind": kind,
                                   "bandwidth_gbps": round(1e-9 / beta, 4),
                                   "alpha_us": round(alpha * 1e6, 3)}
        if kind == "inter-node" and nics and hosts[a] in nics and hosts[b] in nics:
            link["via"] = [f"nic-{hosts[a]}", f"nic-{hosts[b]}"]
        if (a, b) in bus_via:  # intra-host: no NIC
            link["via"] = bus_via[(a, b)]
        links.append(link)
    shared: list[dict[str, object]] = [
        {"name": f"nic-{h}", "node": h, "bandwidth_gbps": round(nics[h] / 1e9, 4)}
        for h in names if nics and h in nics
    ]
    shared += [{"name": f"bus-{bus.host}-{i}", "node": bus.host, "within": True,
                "bandwidth_gbps": round(bus.bytes_per_s / 1e9, 4)}
               for i, bus in enumerate(buses or [])]
    return {
        "name": name,
        "description": f"measured by hpcgnn plan --calibrate{': ' + source if source else ''}",
        "ranks": len(hosts),
        "stage_alpha_us": round(stage_alpha_s * 1e6, 3),
        "alpha_us": {k: round(float(np.median(v)), 3) for k, v in sorted(by_kind.items())},
        **({} if endpoint is None else {"endpoint": {
            "alpha_us": round(endpoint[0] * 1e6, 3),
            "bandwidth_gbps": round(1e-9 / endpoint[1], 4),
            "core_pools": [
                {"ranks": [r for r, x in enumerate(hosts) if x == h], "cores": cores[h]}
                for h in names if cores and h in cores
            ],
        }}),
        "nodes": [{"name": h, "ranks": [r for r, x in enumerate(hosts) if x == h]} for h in names],
        **({"shared": shared} if shared else {}),
        "links": links,
        **({} if contention is None else {"contention": [t.as_dict() for t in contention]}),
    }


def rail_topology(
    nodes: int,
    per_node: int,
    *,
    nvlink_gbps: float = 50.0,
    net_gbps: float = 12.5,
    nic_gbps: float = 25.0,
    nvlink_us: float = 0.0,
    net_us: float = 0.0,
    stage_us: float = 0.0,
    endpoint_us: float | None = None,
    name: str | None = None,
) -> dict:
    """A rail-optimised cluster as a topology document (see :func:`parse_topology`).

    ``nodes`` nodes of ``per_node`` GPUs each; rank ``r`` is GPU ``r % per_node`` of node
    ``r // per_node``. The GPUs of a node are fully connected (``nvlink``); GPU ``i`` of
    every node is linked to GPU ``i`` of every other node (``net``, one rail per GPU
    index) through both nodes' NICs, a shared resource of ``nic_gbps`` per direction and
    node. GPUs on different rails of different nodes have no direct link: the hardware
    route goes through a GPU of one of the two nodes.

    Parameters
    ----------
    nodes, per_node
        Cluster shape; ``nodes * per_node`` ranks.
    nvlink_gbps, net_gbps, nic_gbps
        Bandwidths in GB/s of an NVLink pair, of a rail link, of a node's NIC.
    nvlink_us, net_us, stage_us
        Latency of one message on each kind of link, and of a stage (microseconds; all
        zero: DGCL's bandwidth-only model).
    endpoint_us
        Per-message overhead of every rank (the ``endpoint`` section), or ``None``.
    name
        The topology's name (default ``rail-NODESxPER_NODE``).

    Returns
    -------
    dict
        The JSON document; ``json.dump`` it to get a topology file.
    """
    if nodes < 1 or per_node < 1:
        raise ConfigError(f"a rail topology needs >= 1 node and GPU, got {nodes}x{per_node}")
    n = nodes * per_node
    links = []
    for a in range(n):
        na, ga = divmod(a, per_node)
        links += [{"a": a, "b": b, "bandwidth_gbps": nvlink_gbps, "kind": "nvlink"}
                  for b in range(a + 1, (na + 1) * per_node)]
        links += [{"a": a, "b": b, "bandwidth_gbps": net_gbps, "kind": "net",
                   "via": [f"nic{na}", f"nic{b // per_node}"]}
                  for b in range((na + 1) * per_node + ga, n, per_node)]
    doc = {
        "name": name or f"rail-{nodes}x{per_node}",
        "description": (
            f"{nodes} nodes x {per_node} GPUs: NVLink inside a node ({nvlink_gbps} GB/s), "
            f"GPU i of every node linked to GPU i of every other node ({net_gbps} GB/s) "
            f"through both nodes' NICs ({nic_gbps} GB/s per direction, shared)"
        ),
        "ranks": n,
        "stage_alpha_us": stage_us,
        "alpha_us": {"nvlink": nvlink_us, "net": net_us},
        "nodes": [{"name": f"n{i}", "ranks": list(range(i * per_node, (i + 1) * per_node))}
                  for i in range(nodes)],
        "shared": [{"name": f"nic{i}", "node": f"n{i}", "bandwidth_gbps": nic_gbps}
                   for i in range(nodes)],
        "links": links,
    }
    if endpoint_us is not None:
        doc["endpoint"] = {"alpha_us": endpoint_us}
    return doc


#: Settings of :func:`topology_spec` after the shape, and their :func:`rail_topology`
#: parameters.
RAIL_SETTINGS = ("nvlink_gbps", "net_gbps", "nic_gbps", "nvlink_us", "net_us", "stage_us",
                 "endpoint_us")


#: Most directed links a rail spec may make (the document lists each; planning walks them).
MAX_RAIL_LINKS = 10_000_000


def topology_spec(spec: str) -> dict:
    """The topology document of a spec ``rail:NODESxGPUS[,key=value...]``.

    ``key`` is one of :data:`RAIL_SETTINGS` (bandwidths in GB/s, latencies in
    microseconds), e.g. ``rail:128x8,nvlink_us=3,net_us=8,stage_us=10``.

    Raises
    ------
    ConfigError
        One line naming what is wrong with the spec.
    """
    kind, _, rest = spec.partition(":")
    if kind != "rail" or not rest:
        raise ConfigError(f"topology spec {spec!r}: expected rail:NODESxGPUS[,key=value...]")
    shape, *settings = rest.split(",")
    nodes, x, gpus = shape.partition("x")
    if not (x and nodes.isdigit() and gpus.isdigit()) or int(nodes) < 1 or int(gpus) < 1:
        raise ConfigError(f"topology spec {spec!r}: shape {shape!r} is not NODESxGPUS "
                          "(two positive integers)")
    n, g = int(nodes), int(gpus)
    links = n * g * (g - 1) + g * n * (n - 1)  # NVLink pairs in each node, each rail's pairs
    if links > MAX_RAIL_LINKS:
        raise ConfigError(f"topology spec {spec!r}: {links} links, more than the "
                          f"{MAX_RAIL_LINKS} a topology may have")
    kw: dict[str, Any] = {}  # floats, under the names of RAIL_SETTINGS only
    for item in settings:
        key, eq, value = item.partition("=")
        if key not in RAIL_SETTINGS or not eq:
            raise ConfigError(f"topology spec {spec!r}: {item!r} is not key=value with key "
                              f"one of {', '.join(RAIL_SETTINGS)}")
        try:
            v = float(value)
        except ValueError:
            v = math.nan
        positive = key.endswith("_gbps")
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            raise ConfigError(f"topology spec {spec!r}: {key} must be a finite number "
                              f"{'> 0' if positive else '>= 0'}, got {value!r}")
        kw[key] = v
    return rail_topology(int(nodes), int(gpus), **kw)

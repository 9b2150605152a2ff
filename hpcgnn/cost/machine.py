"""Machine files (``configs/machines/*.json``): the alpha-beta figures of a cluster.

A machine has ``gpus_per_node`` (one rank per GPU), its node ``injection_gbps`` and, per
link kind, ``alpha`` (seconds per message) and ``beta`` (seconds per byte):
``intra_node`` and, for a cluster, ``inter_node``, and optionally ``nics_per_node``: the
injection ports the node's bandwidth splits into (default 1). The cost model charges a
collective whose groups lie in one node the intra-node link and one that crosses nodes the
network's, at the injection share of the streams that leave through the same port at once
(:meth:`Machine.axis_betas`); :meth:`Machine.link` is the whole job's figure, with every
rank of a node sending at once (the uniform charge). A calibrated file (``hpcgnn plan --calibrate
--out-machine``) also has ``collectives``: per job size ``P`` the alpha and beta fitted to
broadcast rounds timed with every rank busy (:func:`fit_link`), and in ``groups`` the beta
of broadcasts within groups of each smaller size ``q`` (a grid axis of ``q`` ranks), which
the model uses for a run of exactly that ``P`` instead of the links. Every file names the source of
its numbers in ``comment`` and per link in ``source``.

A machine file may also describe its node for batch jobs (``hpcgnn jobs render --machine``):
``cores_per_node`` (the cores a job may use), ``sockets_per_node``, ``numa_per_node`` and
``threads_per_core``, and a ``job`` section (:mod:`hpcgnn.cost.node_shape`). A machine
without GPUs runs one rank per NUMA domain, so the model's node holds ``numa_per_node``
ranks there (:attr:`Machine.node_ranks`), unless a run places fewer
(:meth:`Machine.placed`, ``hpcgnn model --ranks-per-node``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hpcgnn.errors import ConfigError
from hpcgnn.layout.placement import AXES, axis_dims, ring_streams, spans_nodes
from hpcgnn.planning.dedup import parse_tier_gbps
from hpcgnn.utils.json_text import read_json
from hpcgnn.utils.shipped import shipped_dir
from hpcgnn.utils.text import printable

#: The machine files (``configs/machines`` of a source checkout, or a wheel's copy).
MACHINES_DIR = shipped_dir("configs", "*.json") / "machines"
LINK_KINDS = ("intra_node", "inter_node")
#: HongTu's tiers of ``tier_gbps``.
TIERS = ("hd", "dd", "ru")


@dataclass(frozen=True)
class Link:
    """One kind of link: seconds per message and per byte."""

    alpha: float
    beta: float


@dataclass(frozen=True)
class Machine:
    """A cluster's figures for the cost model.

    Attributes
    ----------
    name
        The machine's name.
    gpus_per_node
        GPUs (ranks) per node; 0 for a machine without GPUs.
    injection_gbps
        A node's network injection bandwidth, GB/s (0 without a network).
    links
        ``alpha`` and ``beta`` per link kind; ``intra_node`` always, ``inter_node`` for
        a cluster.
    comment
        Where the numbers come from.
    tier_gbps
        HongTu's tiers (``hd`` host to device, ``dd`` device to device, ``ru`` a device's
        own copies), GB/s, for offload's modelled cost ``C``; ``None`` where the file
        gives none (the defaults of :data:`~hpcgnn.planning.dedup.DEFAULT_TIER_GBPS`).
    collectives
        Calibrated alpha and beta by job size ``P`` (:func:`fit_link`), empty for a
        nominal machine.
    groups
        Calibrated fits within groups of ``q < P`` ranks, by job size ``P`` then ``q``
        (:meth:`axis_betas`).
    cores_per_node
        Cores a job may use on a node; 0 where the file does not say.
    sockets_per_node, numa_per_node, threads_per_core
        The node's sockets, NUMA domains and hardware threads per core (1 where the file
        does not say).
    nics_per_node
        Injection ports: ``injection_gbps`` splits evenly over them and the node's ranks
        reach them in order (Summit: 2, a socket's half of the dual-rail injection;
        Perlmutter: 4 NICs, one per GPU). 1 where the file does not say.
    ranks_per_node
        Ranks a run places on a node (:meth:`placed`); 0: one per GPU, else one per NUMA
        domain (:attr:`node_ranks`).

    """

    name: str
    gpus_per_node: int
    injection_gbps: float
    links: dict[str, Link]
    comment: str
    tier_gbps: dict[str, float] | None = None
    collectives: dict[int, Link] = field(default_factory=dict)
    groups: dict[int, dict[int, Link]] = field(default_factory=dict)
    cores_per_node: int = 0
    sockets_per_node: int = 1
    numa_per_node: int = 1
    threads_per_core: int = 1
    nics_per_node: int = 1
    ranks_per_node: int = 0

    @property
    def node_ranks(self) -> int:
        """Ranks of a node in the model: as placed, else one per GPU or per NUMA domain."""
        return self.ranks_per_node or self.gpus_per_node or self.numa_per_node

    def placed(self, ranks_per_node: int | None) -> Machine:
        """This machine with ``ranks_per_node`` ranks on a node (``None``: the default).

        Raises
        ------
        ConfigError
            Fewer than one rank, or more than one per GPU (per NUMA domain without GPUs).
        """
        if ranks_per_node is None:
            return self
        most = self.gpus_per_node or self.numa_per_node
        if not 1 <= ranks_per_node <= most:
            unit = "GPUs" if self.gpus_per_node else "NUMA domains"
            raise ConfigError(f"--ranks-per-node must be in [1, {most}] (machine {self.name}"
                              f" has {most} {unit} per node), got {ranks_per_node}")
        return replace(self, ranks_per_node=ranks_per_node)

    def stream_beta(self, streams: int) -> float:
        """Seconds per byte of one of ``streams`` ring streams sharing an injection port.

        ``max(beta_inter_node, streams / port bytes/s)`` with a port's share
        ``injection_gbps / nics_per_node`` (the link's figure alone without an injection
        bandwidth). Summit: a socket's 12.5 GB/s port, so one stream runs at the link's
        12.5 GB/s, two at 6.25 GB/s each, three at 4.2 (CAGNET Sec. 6.1).
        """
        link = self.links["inter_node"]
        if self.injection_gbps <= 0:
            return link.beta
        return max(link.beta, streams * self.nics_per_node / (self.injection_gbps * 1e9))

    def link_kind(self, procs: int) -> str:
        """The link that bounds a collective over ``procs`` ranks."""
        if "inter_node" in self.links and procs > self.node_ranks:
            return "inter_node"
        return "intra_node"

    def link(self, procs: int) -> Link:
        """:meth:`link_kind`'s alpha and beta for a whole job: the uniform charge.

        Across nodes it assumes every one of the :attr:`node_ranks` ranks of a node sends at
        once, spread over the :attr:`nics_per_node` ports (:meth:`stream_beta` of the
        busiest port's ranks; Summit: 3 GPUs on a socket's 12.5 GB/s, 4.2 GB/s each;
        Perlmutter: a GPU on each 25 GB/s NIC). That bounds the collectives' streams from
        above; :meth:`axis_betas` counts them. Within a node, and for a machine without
        ``injection_gbps``, the link's figures. A calibrated machine's fit for exactly
        ``procs`` ranks (:attr:`collectives`) comes first.
        """
        if procs in self.collectives:
            return self.collectives[procs]
        kind = self.link_kind(procs)
        link = self.links[kind]
        if kind != "inter_node":
            return link
        ranks = min(self.node_ranks, procs)
        return Link(link.alpha, self.stream_beta(-(-ranks // self.nics_per_node)))

    def axis_betas(self, dims: tuple[int, ...]) -> dict[str, float]:
        """Seconds per byte of each axis of a grid ``dims`` (rank-ordered placement).

        An axis whose every group lies in one node (:attr:`node_ranks` ranks a node) runs
        over the ``intra_node`` link, another over the network at :meth:`stream_beta` of
        the ring streams that leave one injection port while every group of the axis
        communicates (:func:`hpcgnn.layout.placement.ring_streams`). Summit, 6 ranks a
        node, 1.5D ``P/c x c``: the ``c`` column rings leave a node from its last ranks,
        one socket's, and share its 12.5 GB/s (c = 2: 6.25 GB/s each); a rank a node:
        12.5 GB/s each. A calibrated job size (:attr:`collectives`) gives an axis of ``q``
        ranks the fit of its groups of ``q`` (:attr:`groups`; the job's fit for ``q = P`` and for
        an axis whose groups cross nodes where the calibration's groups of consecutive
        ranks did not).
        """
        procs = math.prod(dims)
        whole = self.link(procs).beta
        if procs in self.collectives:
            groups = self.groups.get(procs, {})
            out = {"world": whole}
            for axis in AXES:
                q = math.prod(dims[d] for d in axis_dims(axis, len(dims)))
                crosses = spans_nodes(dims, axis, self.node_ranks) and not spans_nodes(
                    (procs // q, q), "row", self.node_ranks)
                out[axis] = whole if crosses or q not in groups else groups[q].beta
            return out
        if self.link_kind(procs) != "inter_node":
            return {axis: whole for axis in ("world", *AXES)}
        inside = self.links["intra_node"].beta
        out = {}
        for axis in ("world", *AXES):
            streams = ring_streams(dims, axis, self.node_ranks, self.nics_per_node)
            out[axis] = self.stream_beta(streams) if streams else inside
        return out


def machine_names() -> list[str]:
    """The machines of :data:`MACHINES_DIR`."""
    return sorted(p.stem for p in MACHINES_DIR.glob("*.json"))


def load_machine(name: str) -> Machine:
    """Read a machine by name (``configs/machines/NAME.json``) or from a ``.json`` path.

    Raises
    ------
    ConfigError
        One line: an unknown name (listing the known ones), an unreadable file, bad JSON,
        or a missing or non-positive field.
    """
    path, doc = read_machine_doc(name)
    return parse_machine(doc, str(path))


def read_machine_doc(name: str) -> tuple[Path, object]:
    """The path and parsed JSON of machine ``name`` (a name or a ``.json`` path), unchecked."""
    path = Path(name) if name.endswith(".json") else MACHINES_DIR / f"{name}.json"
    if not name.endswith(".json") and not path.is_file():
        raise ConfigError(
            f"unknown machine '{name}' (known: {', '.join(machine_names()) or 'none'};"
            " or pass a .json file)"
        )
    try:
        return path, read_json(path)
    except ValueError as err:
        raise ConfigError(f"machine file {path}: {err}") from None


def parse_machine(doc: object, where: str = "<dict>") -> Machine:
    """Validate a parsed machine document (see :func:`load_machine`)."""

    def bad(what: str) -> ConfigError:  # names read from the file escaped, never raw
        return ConfigError(printable(f"machine file {where}: {what}"))

    def number(value: object, field: str, positive: bool) -> float:
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not math.isfinite(value)
            or value < 0
            or (positive and value == 0)
        ):
            sign = "positive" if positive else "non-negative"
            raise bad(f"'{field}' must be a {sign} number, got {value!r}")
        return float(value)

    def link_at(entry: dict, name: str) -> Link:
        """The alpha (>= 0) and beta (> 0) of ``entry``, named ``name`` in errors."""
        return Link(number(entry["alpha"], f"{name}.alpha", False),
                    number(entry["beta"], f"{name}.beta", True))

    if not isinstance(doc, dict):
        raise bad("top level must be a JSON object")
    for key in ("gpus_per_node", "injection_gbps", "links"):
        if key not in doc:
            raise bad(f"missing field '{key}'")
    def count(key: str, least: int, default: int) -> int:
        value = doc.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise bad(f"'{key}' must be an integer >= {least}, got {value!r}")
        return value

    gpus = count("gpus_per_node", 0, 0)
    sockets, numa = count("sockets_per_node", 1, 1), count("numa_per_node", 1, 1)
    cores = count("cores_per_node", 0, 0)
    if numa % sockets or cores % sockets:
        raise bad(f"'numa_per_node' ({numa}) and 'cores_per_node' ({cores}) must be multiples"
                  f" of 'sockets_per_node' ({sockets})")
    links = doc["links"]
    if not isinstance(links, dict) or "intra_node" not in links:
        raise bad("'links' must be an object with at least 'intra_node'")
    parsed = {}
    for kind, link in links.items():
        if kind not in LINK_KINDS:
            raise bad(f"unknown link kind '{kind}' (choose from {', '.join(LINK_KINDS)})")
        if not isinstance(link, dict) or not {"alpha", "beta"} <= set(link):
            raise bad(f"link '{kind}' needs 'alpha' (s) and 'beta' (s/byte)")
        parsed[kind] = link_at(link, kind)
    collectives = doc.get("collectives", {})
    if not isinstance(collectives, dict) or not all(
        isinstance(k, str) and k.isdigit() and int(k) > 0 and isinstance(v, dict)
        and {"alpha", "beta"} <= set(v) for k, v in collectives.items()
    ):
        raise bad("'collectives' must map job sizes (\"4\") to {'alpha', 'beta'}")
    fits: dict[int, Link] = {}
    groups: dict[int, dict[int, Link]] = {}
    for k, v in collectives.items():
        fits[int(k)] = link_at(v, f"collectives.{k}")
        sizes = v.get("groups", {})
        if not isinstance(sizes, dict) or not all(
            isinstance(q, str) and q.isdigit() and 1 < int(q) < int(k) and int(k) % int(q) == 0
            and isinstance(g, dict) and {"alpha", "beta"} <= set(g) for q, g in sizes.items()
        ):
            raise bad(f"'collectives.{k}.groups' must map group sizes dividing {k} (\"2\") to"
                      " {'alpha', 'beta'}")
        if sizes:
            groups[int(k)] = {int(q): link_at(g, f"collectives.{k}.groups.{q}")
                              for q, g in sizes.items()}
    tiers = doc.get("tier_gbps")
    if tiers is not None:
        if not isinstance(tiers, dict) or not set(tiers) - {"source"} <= set(TIERS):
            raise bad(f"'tier_gbps' must be an object of {', '.join(TIERS)} (GB/s)")
        tiers = {t: number(v, f"tier_gbps.{t}", True) for t, v in tiers.items() if t in TIERS}
    return Machine(
        name=printable(str(doc.get("name", Path(where).stem))),
        gpus_per_node=gpus,
        injection_gbps=number(doc["injection_gbps"], "injection_gbps", False),
        links=parsed,
        comment=str(doc.get("comment", "")),
        tier_gbps=tiers,
        collectives=fits,
        groups=groups,
        cores_per_node=cores,
        sockets_per_node=sockets,
        numa_per_node=numa,
        threads_per_core=count("threads_per_core", 1, 1),
        nics_per_node=count("nics_per_node", 1, 1),
    )


def fit_link(samples: Sequence[tuple[float, float, float]]) -> Link:
    """``alpha`` and ``beta`` of ``t = alpha messages + beta bytes`` fitted to ``samples``.

    ``samples``: ``(messages, bytes, seconds)`` of collectives timed as the algorithms run
    them (:func:`hpcgnn.comm.calibrate.busy_collectives`). Least squares of the relative
    errors, so a microsecond collective counts as much as a second's; ``alpha >= 0``
    (where the free fit's is negative, the fit through the origin). A fit whose ``beta`` is
    not positive (the larger messages no slower) is refused, not clamped.
    """
    arr = np.asarray(samples, dtype=np.float64).reshape(-1, 3)
    if len(arr) < 2 or not np.all(arr[:, 2] > 0):
        raise ConfigError("calibration: need two or more collectives timed above zero")
    rows = arr[:, :2] / arr[:, 2:]
    (alpha, beta), *_ = np.linalg.lstsq(rows, np.ones(len(arr)), rcond=None)
    if alpha < 0:
        per_byte = rows[:, 1]
        alpha, beta = 0.0, float(per_byte.sum() / (per_byte @ per_byte))
    if not beta > 0:
        raise ConfigError(
            "calibration: no positive per-byte time fits the collectives (larger messages "
            "timed no slower); rerun on an idle machine"
        )
    return Link(float(alpha), float(beta))


def tiers_from_flag(text: str | Mapping[str, float] | None) -> dict[str, float] | None:
    """``--tier-gbps``: ``hd=25,dd=200,ru=1500``, or a machine (name or ``.json``) whose tiers.

    ``None`` or empty: the defaults; a mapping (``{"hd": 25}``) is checked as the text. A
    machine file without ``tier_gbps`` is refused in one line.
    """
    if not text or isinstance(text, Mapping) or "=" in text:
        return parse_tier_gbps(text)
    machine = load_machine(text)
    if machine.tier_gbps is None:
        raise ConfigError(f"--tier-gbps {text}: machine '{machine.name}' gives no tier_gbps")
    return dict(machine.tier_gbps)


def measured_machine(
    name: str, hosts: list[str], pairs: dict[tuple[int, int], tuple[float, float]], how: str,
    collective: Link | None = None, previous: dict | None = None,
    group_fits: dict[int, Link] | None = None,
) -> dict:
    """A machine document from ``hpcgnn plan --calibrate``'s ping-pongs (see :func:`load_machine`).

    ``hosts``: each rank's host; ``pairs``: ``(a, b) -> (alpha_s, beta_s_per_byte)`` of
    every measured pair. Per link kind the medians of the pairs on one host
    (``intra_node``) and across hosts (``inter_node``); ``gpus_per_node`` is the ranks a
    host ran (the model's node: ``inter_node`` beyond it); no injection figure (the
    ping-pongs ran one pair at a time). ``collective``: the busy collectives' fit
    (:func:`fit_link`) for this job's ``len(hosts)`` ranks, added to the ``collectives``
    of ``previous`` (the machine file being rewritten, if it was one: runs at several
    ``P`` build one file). ``group_fits``: the fits of broadcasts within groups of ``q < P``
    ranks, by ``q``. Raises :class:`ConfigError` without a pair inside a host.
    """
    groups: dict[str, list[tuple[float, float]]] = {"intra_node": [], "inter_node": []}
    for (a, b), fit in pairs.items():
        groups["intra_node" if hosts[a] == hosts[b] else "inter_node"].append(fit)
    if not groups["intra_node"]:
        raise ConfigError("--out-machine needs two ranks on one host (run under mpiexec -n 2+)")

    def median(values: list[float]) -> float:
        return float(sorted(values)[len(values) // 2])

    links = {
        kind: {"alpha": median([a for a, _ in fits]), "beta": median([b for _, b in fits]),
               "source": f"median of {len(fits)} measured pairs"}
        for kind, fits in groups.items() if fits
    }
    per_host = max(hosts.count(h) for h in set(hosts))
    doc = {
        "name": name,
        "comment": f"measured by hpcgnn plan --calibrate on {len(set(hosts))} host(s), "
                   f"{len(hosts)} ranks: {how}",
        "gpus_per_node": per_host, "injection_gbps": 0.0, "links": links,
    }
    fits = dict((previous or {}).get("collectives", {}))
    if collective is not None:
        fits[str(len(hosts))] = {
            "alpha": collective.alpha, "beta": collective.beta,
            "source": "broadcast rounds of every rank, fitted",
        }
        if group_fits:
            fits[str(len(hosts))]["groups"] = {
                str(q): {"alpha": g.alpha, "beta": g.beta}
                for q, g in sorted(group_fits.items())
            }
    if fits:
        doc["collectives"] = dict(sorted(fits.items(), key=lambda kv: int(kv[0])))
    parse_machine(doc, name)  # what is written reads back
    return doc

"""Seeded synthetic graphs, generated in edge chunks: SBM (for accuracy) and RMAT (for scale).

Both generators share everything but the edges:

- **labels**: a balanced random assignment, ``permutation(arange(n) % C)``, so every class
  has ``n / C`` vertices (give or take one);
- **features**: ``centre[label] + feature_noise * N(0, 1)`` per entry, float32, with
  random class centres of norm about 1 (:func:`hpcgnn.prepare.features.class_centres`);
- **split**: a random ``train_frac`` / ``val_frac`` / rest split of all vertices.

Edges:

- **sbm** (stochastic block model, the classes are the blocks): each edge picks a source
  uniformly at random; with probability ``intra_fraction`` its target is a uniform vertex
  of the same class, otherwise a uniform vertex of another class. Degrees are Poisson and
  the graph is homophilous, so a GCN beats a feature-only model.
- **rmat** (Graph500 Kronecker parameters ``a, b, c, d = 0.57, 0.19, 0.19, 0.05``): each
  edge descends ``scale = ceil(log2 n)`` levels of the adjacency quadtree. Edges with an
  endpoint ``>= n`` (possible when ``n`` is not a power of two) are rejected and replaced,
  which keeps the power-law shape. Vertex ids are then relabelled by a seeded random
  permutation, as Graph500 does, so degree is not correlated with id. Degrees are heavily
  skewed and many vertices are isolated (44 % at n = 10^6, D = 20). Labels are
  independent of the graph: RMAT files are meant for scale and timing runs.

``avg_degree`` ``D`` asks for ``n * D / 2`` undirected edges (stored in both directions,
so the mean stored degree is about ``D``) or ``n * D`` directed edges. Self loops and
duplicates are dropped by :class:`~hpcgnn.io.EdgeSorter`, so the stored count is a little
lower (noticeably for RMAT, whose hubs attract repeated edges); the summary reports it.

Every random stream comes from ``numpy.random.SeedSequence(seed)``, and chunk and block
sizes are constants, so the same parameters and seed give identical datasets.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from hpcgnn.errors import ConfigError
from hpcgnn.io import EdgeSorter
from hpcgnn.io.format import index_dtype
from hpcgnn.prepare.features import class_centres, class_feature_blocks, row_normalized_blocks
from hpcgnn.prepare.output import GraphParts, check_memory, write_graph
from hpcgnn.prepare.splits import check_fractions, random_split
from hpcgnn.prepare.summary import PrepareSummary
from hpcgnn.utils.progress import Progress

GENERATORS = ("sbm", "rmat")

#: Graph500 RMAT quadrant probabilities a, b, c, d.
GRAPH500_ABCD = (0.57, 0.19, 0.19, 0.05)

#: Edges generated (or fed to the edge sorter) per chunk; bounds the transient memory of
#: generating and bucketing one chunk (a few hundred bytes per edge).
EDGE_CHUNK = 1 << 20

EdgeChunk = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class SyntheticSpec:
    """Parameters of a synthetic graph.

    Attributes
    ----------
    generator
        ``"sbm"`` or ``"rmat"``.
    nodes
        Number of vertices.
    avg_degree
        Target mean stored degree (before self loops and duplicates are dropped).
    features, classes
        Feature width and number of classes.
    directed
        Generate a directed graph (``A`` and ``A^T`` stored).
    seed
        Seed of every random stream.
    intra_fraction
        SBM only: probability that an edge stays inside its source's class.
    feature_noise
        Standard deviation of the Gaussian noise added to the class centres.
    train_frac, val_frac
        Fractions of vertices in the train and validation masks; the rest is test.

    """

    generator: str
    nodes: int
    avg_degree: float
    features: int
    classes: int
    directed: bool = False
    seed: int = 0
    intra_fraction: float = 0.8
    feature_noise: float = 2.0
    train_frac: float = 0.6
    val_frac: float = 0.2

    def validate(self) -> None:
        """Raise :class:`ConfigError` on a parameter outside its range."""
        if self.generator not in GENERATORS:
            raise ConfigError(f"unknown generator {self.generator!r}; choose from {GENERATORS}")
        if self.nodes < 2:
            raise ConfigError(f"--nodes must be at least 2, got {self.nodes}")
        if not 0 < self.avg_degree <= self.nodes - 1:
            raise ConfigError(
                f"--avg-degree must lie in (0, nodes - 1 = {self.nodes - 1}], got {self.avg_degree}"
            )
        if self.features < 1:
            raise ConfigError(f"--features must be positive, got {self.features}")
        if not 1 <= self.classes <= self.nodes:
            raise ConfigError(f"--classes must lie in [1, nodes], got {self.classes}")
        if self.seed < 0:
            raise ConfigError(f"--seed must be non-negative, got {self.seed}")
        if not 0.0 <= self.intra_fraction <= 1.0:
            raise ConfigError(f"--intra-fraction must lie in [0, 1], got {self.intra_fraction}")
        if not (self.feature_noise >= 0.0 and math.isfinite(self.feature_noise)):
            raise ConfigError(f"--feature-noise must be finite and >= 0, got {self.feature_noise}")
        check_fractions(self.train_frac, self.val_frac)

    @property
    def edges_to_generate(self) -> int:
        """Edge records generated: ``n * D`` directed or ``n * D / 2`` undirected."""
        return round(self.nodes * self.avg_degree / (1 if self.directed else 2))

    @property
    def name(self) -> str:
        """Default dataset name, e.g. ``sbm-n20000-d16-f64-c8-s0``."""
        kind = "-directed" if self.directed else ""
        return (
            f"{self.generator}-n{self.nodes}-d{self.avg_degree:g}-f{self.features}"
            f"-c{self.classes}-s{self.seed}{kind}"
        )


def balanced_labels(num_nodes: int, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Class ids with every class of size ``num_nodes // num_classes`` or one more."""
    return rng.permutation(np.arange(num_nodes, dtype=np.int64) % num_classes)


def sbm_edges(
    labels: np.ndarray, num_classes: int, num_edges: int, intra_fraction: float,
    rng: np.random.Generator,
) -> Iterator[EdgeChunk]:
    """Yield SBM edges in chunks of at most :data:`EDGE_CHUNK`.

    Parameters
    ----------
    labels
        Class (block) of every vertex.
    num_classes
        Number of classes.
    num_edges
        Total number of edges to yield.
    intra_fraction
        Probability that an edge's target is in its source's class; the target is
        uniform within the chosen side. With a single class every edge is intra-class.
    rng
        Source of randomness.

    """
    n = labels.size
    size = np.bincount(labels, minlength=num_classes).astype(np.int64)
    offset = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
    members = np.argsort(labels, kind="stable").astype(index_dtype(n))
    for lo in range(0, num_edges, EDGE_CHUNK):
        k = min(EDGE_CHUNK, num_edges - lo)
        src = rng.integers(0, n, k)
        cls = labels[src]
        inside = size[cls]
        intra = (rng.random(k) < intra_fraction) | (inside == n)
        pool = np.where(intra, inside, n - inside)
        pick = np.minimum((rng.random(k) * pool).astype(np.int64), pool - 1)
        start = offset[cls]
        # Positions in `members` outside the block [start, start + inside) of the class.
        pos = np.where(intra, start + pick, pick + inside * (pick >= start))
        yield src, members[pos].astype(np.int64)


def rmat_edges(
    num_nodes: int, num_edges: int, rng: np.random.Generator, perm_rng: np.random.Generator
) -> Iterator[EdgeChunk]:
    """Yield Graph500 RMAT edges in chunks of at most :data:`EDGE_CHUNK`.

    Parameters
    ----------
    num_nodes
        Number of vertices ``n``; the recursion has ``ceil(log2 n)`` levels and edges with
        an endpoint ``>= n`` are rejected (and replaced by new draws).
    num_edges
        Total number of edges to yield.
    rng
        Source of the quadrant choices.
    perm_rng
        Source of the vertex relabelling permutation.

    """
    a, b, c, _ = (np.float32(p) for p in GRAPH500_ABCD)
    ab, abc = a + b, a + b + c
    scale = max(1, math.ceil(math.log2(num_nodes)))
    bits = np.uint32 if scale <= 32 else np.uint64
    perm = perm_rng.permutation(num_nodes).astype(index_dtype(num_nodes))
    done = 0
    while done < num_edges:
        k = min(EDGE_CHUNK, max(1 << 12, 2 * (num_edges - done)))
        src = np.zeros(k, dtype=bits)
        dst = np.zeros(k, dtype=bits)
        for _ in range(scale):
            # One uniform draw picks the quadrant: [0, a) a, [a, a+b) b, [a+b, a+b+c) c, else d.
            r = rng.random(k, dtype=np.float32)
            lower = r >= ab  # quadrants c and d: the source bit is 1
            src <<= 1
            dst <<= 1
            src |= lower
            dst |= (r >= a) ^ lower ^ (r >= abc)  # quadrants b and d: the target bit is 1
        keep = (src < num_nodes) & (dst < num_nodes)
        src, dst = src[keep], dst[keep]
        take = min(src.size, num_edges - done)
        done += take
        yield perm[src[:take]].astype(np.int64), perm[dst[:take]].astype(np.int64)


def generate(
    spec: SyntheticSpec,
    out: str | os.PathLike,
    *,
    name: str | None = None,
    tmpdir: str | os.PathLike | None = None,
    show_progress: bool = True,
    row_normalize: bool = False,
) -> PrepareSummary:
    """Generate the graph described by ``spec`` and write it to ``out``.

    Parameters
    ----------
    spec
        Generator and parameters; checked with :meth:`SyntheticSpec.validate`.
    out
        Output ``.h5`` path.
    name
        Dataset name stored in the file (default: :attr:`SyntheticSpec.name`).
    tmpdir
        Directory for the edge sorter's spill files.
    show_progress
        Show progress bars.
    row_normalize
        Divide every feature row by the sum of its absolute values (recorded in the file,
        ``feature_normalization = "row"``).

    Returns
    -------
    PrepareSummary
        What was written.

    """
    started = time.perf_counter()
    spec.validate()
    check_memory(
        f"--nodes {spec.nodes}, --features {spec.features}, --classes {spec.classes}",
        spec.nodes, spec.features,
        stored_edges=spec.edges_to_generate * (1 if spec.directed else 2),
        extra_bytes=12 * spec.classes * spec.features,  # class centres: float64 draws, float32
    )
    streams = np.random.SeedSequence(spec.seed).spawn(5)
    label_rng, edge_rng, perm_rng, feature_rng, split_rng = (
        np.random.default_rng(s) for s in streams
    )
    n = spec.nodes
    labels = balanced_labels(n, spec.classes, label_rng)
    m = spec.edges_to_generate
    if spec.generator == "sbm":
        chunks = sbm_edges(labels, spec.classes, m, spec.intra_fraction, edge_rng)
    else:
        chunks = rmat_edges(n, m, edge_rng, perm_rng)
    with EdgeSorter(n, spec.directed, m, tmpdir) as sorter:
        with Progress(f"generating {spec.generator} edges", m, "edges",
                      enabled=show_progress) as bar:
            for src, dst in chunks:
                sorter.add(src, dst)
                bar.update(src.size)
        centres = class_centres(spec.classes, spec.features, feature_rng)
        blocks = class_feature_blocks(labels, centres, spec.feature_noise, feature_rng)
        parts = GraphParts(
            num_nodes=n,
            num_features=spec.features,
            num_classes=spec.classes,
            feature_blocks=row_normalized_blocks(blocks) if row_normalize else blocks,
            labels=labels,
            masks=random_split(labels, spec.train_frac, spec.val_frac, split_rng),
            name=name or spec.name,
            source=f"hpcgnn synthetic {spec}",
            feature_normalization="row" if row_normalize else "",
        )
        return write_graph(out, sorter, parts, started=started, show_progress=show_progress)

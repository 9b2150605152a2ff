"""Full validation of a graph file, streamed in blocks, with the statistics ``hpcgnn info`` shows.

:class:`~hpcgnn.io.reader.GraphFile` checks the header when a file is opened (format
name and version, every dataset present with the right shape and dtype kind).
:func:`validate_file` adds every check on the *contents*:

* each CSR: ``indptr`` starts at 0, never decreases and ends at ``num_edges``; every
  column index lies in ``[0, num_nodes)``;
* undirected graphs: ``A`` is symmetric; directed graphs: ``adjacency_t`` holds exactly the
  entries of ``A^T`` (per-vertex degrees compared exactly, the edge sets through an
  order-independent 64-bit fingerprint of all entries);
* edge weights (if stored): finite, and symmetric (``w(i, j) == w(j, i)``) or equal in
  ``A^T`` (through a second fingerprint that folds in each entry's weight);
* features are finite; labels lie in ``[-1, num_classes)``; every vertex of a mask is
  labelled; the train, val and test masks are disjoint; original vertex ids are unique;
* a partition (if present): ``offsets`` run from 0 to ``num_nodes`` without decreasing and
  ``perm`` is a permutation of ``0 .. num_nodes - 1``.

Self loops, duplicate entries and rows whose column indices are not sorted do not make a
file invalid (the GCN normalisation adds self loops itself and duplicates only change
edge weights); they are counted and reported as warnings.

Edges and features are read in blocks of about :data:`EDGE_BLOCK` entries and
:data:`FEATURE_BLOCK_BYTES` bytes, so memory is O(num_nodes) for the per-vertex counts plus
one block, never O(num_edges). Every problem raises :class:`~hpcgnn.errors.InputError`
with one line, ``"<path>: <what is wrong>"``.

The checks that work on any slice of rows and combine by a sum, a minimum or a merge
(:func:`indptr_problem`, :class:`CsrScan`, :func:`edges_problem`, :func:`mask_problem`,
:func:`node_ids_problem`, :class:`IdCounts` and :func:`permutation_problem`) are module
functions: :mod:`hpcgnn.graph.check` runs them distributed over the ranks before
``hpcgnn train`` and ``hpcgnn sample`` build anything, so both commands refuse a broken
file with the line ``info`` prints.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.reader import GraphFile, GraphMeta
from hpcgnn.rng import mix_into
from hpcgnn.utils.progress import Progress

#: Column indices read per block (at most; a single longer row is read whole).
EDGE_BLOCK = 1 << 20
#: Bytes per entry a block's read and scan hold at once (:class:`CsrScan`: the block's
#: 64-bit ids and values, its 64-bit rows, a fingerprint's key and temporary), measured:
#: 40 MiB for a block of :data:`EDGE_BLOCK` entries.
SCAN_BYTES_PER_ENTRY = 40


def scan_bytes(num_edges: float, ranks: int) -> float:
    """Bytes one rank's block of the graph check holds (the memory estimates' part).

    Its ``1 / ranks`` of the edges, at most :data:`EDGE_BLOCK` of them, at
    :data:`SCAN_BYTES_PER_ENTRY` each.
    """
    return SCAN_BYTES_PER_ENTRY * min(num_edges / ranks, EDGE_BLOCK)


#: Rows of ``indptr``, labels and masks read per block.
ROW_BLOCK = 1 << 20
#: Bytes of feature rows read per block.
FEATURE_BLOCK_BYTES = 1 << 26

_U64 = np.uint64
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class DegreeSummary:
    """Distribution of one kind of vertex degree.

    Attributes
    ----------
    minimum, maximum
        Smallest and largest degree.
    mean, median
        Average and median degree.
    zero
        Number of vertices of degree 0.

    """

    minimum: int
    mean: float
    median: float
    maximum: int
    zero: int

    @classmethod
    def of(cls, degrees: np.ndarray) -> DegreeSummary:
        """Summarise a non-empty array of degrees."""
        return cls(
            minimum=int(degrees.min()),
            mean=float(degrees.mean()),
            median=float(np.median(degrees)),
            maximum=int(degrees.max()),
            zero=int(np.count_nonzero(degrees == 0)),
        )


@dataclass(frozen=True)
class PartitionSummary:
    """The vertex partition recorded in a file.

    Attributes
    ----------
    method
        How it was computed (``block``, ``random`` or ``metis``).
    sizes
        Vertices per part.
    edges
        Stored entries of ``A`` per part (the out-edges of its rows).
    edge_cut
        Edges whose endpoints lie in different parts, recomputed from the file (directed:
        entries of ``A``; undirected: each undirected edge counted once).

    """

    method: str
    sizes: tuple[int, ...]
    edges: tuple[int, ...]
    edge_cut: int

    @property
    def num_parts(self) -> int:
        """Number of parts."""
        return len(self.sizes)

    @property
    def vertex_balance(self) -> float:
        """Largest part size over mean part size (1.0 is perfect balance)."""
        return _balance(self.sizes)

    @property
    def edge_balance(self) -> float:
        """Largest per-part edge count over the mean edge count."""
        return _balance(self.edges)


@dataclass(frozen=True)
class GraphReport:
    """Statistics of a valid graph file, as computed by :func:`validate_file`.

    Attributes
    ----------
    meta
        Header of the file (sizes, flags, format version, partition offsets).
    undirected_edges
        For undirected files, the number of undirected edges (``num_edges`` counts both
        stored directions); ``None`` for directed files.
    train, val, test
        Number of vertices in each mask.
    unlabelled
        Number of vertices with label ``-1`` (0 in a multi-label file).
    class_histogram
        Number of vertices of each class ``0 .. k - 1``, ``k`` the largest label present
        plus one (at most ``num_classes``; the classes above have no vertex). Multi-label:
        the vertices with a 1 in each class's column, every class.
    out_degree
        Out-degrees (rows of ``A``); for undirected files simply the degrees.
    in_degree
        In-degrees (rows of ``A^T``) for directed files, else ``None``.
    isolated
        Vertices without any incident edge.
    self_loops, duplicates, unsorted_rows
        Stored self loops, repeated entries within a row, and rows of ``A`` whose column
        indices are not increasing (all allowed; reported as warnings).
    partition
        The recorded partition, or ``None``.
    warnings
        One line per harmless irregularity found.

    """

    meta: GraphMeta
    undirected_edges: int | None
    train: int
    val: int
    test: int
    unlabelled: int
    class_histogram: tuple[int, ...]
    out_degree: DegreeSummary
    in_degree: DegreeSummary | None
    isolated: int
    self_loops: int
    duplicates: int
    unsorted_rows: int
    partition: PartitionSummary | None
    warnings: tuple[str, ...]

    def to_dict(self) -> dict:
        """Return the report as JSON-serialisable nested dictionaries."""
        meta = self.meta
        out: dict = {
            "path": meta.path,
            "name": meta.name,
            "format_version": meta.format_version,
            "directed": meta.directed,
            "weighted": meta.weighted,
            "vertices": meta.num_nodes,
            "edges": meta.num_edges,
            "undirected_edges": self.undirected_edges,
            "features": meta.num_features,
            "feature_dtype": str(meta.feature_dtype),
            "feature_nonzeros": meta.feature_nnz,
            "feature_normalization": meta.feature_normalization or None,
            "classes": meta.num_classes,
            "multi_label": meta.multi_label,
            "train": self.train,
            "val": self.val,
            "test": self.test,
            "unlabelled": self.unlabelled,
            "class_histogram": list(self.class_histogram),
            "out_degree": asdict(self.out_degree),
            "in_degree": asdict(self.in_degree) if self.in_degree is not None else None,
            "isolated": self.isolated,
            "self_loops": self.self_loops,
            "duplicates": self.duplicates,
            "unsorted_rows": self.unsorted_rows,
            "partition": None,
            "warnings": list(self.warnings),
            "valid": True,
        }
        p = self.partition
        if p is not None:
            out["partition"] = {
                "method": p.method,
                "num_parts": p.num_parts,
                "sizes": list(p.sizes),
                "edges": list(p.edges),
                "edge_cut": p.edge_cut,
                "vertex_balance": p.vertex_balance,
                "edge_balance": p.edge_balance,
            }
        return out


def _balance(sizes: tuple[int, ...]) -> float:
    total = sum(sizes)
    return max(sizes) * len(sizes) / total if total else 1.0


def mask_problem(y: np.ndarray, masks: dict[str, np.ndarray], lo: int) -> str | None:
    """What is wrong with the labels and masks of rows ``lo ..``, or ``None``.

    Every vertex of a mask must be labelled, and the masks must be disjoint. ``train``
    runs this cheap check on the rows each rank reads, ``info`` on the whole file.
    """
    seen = np.zeros(len(y), dtype=np.int8)
    for m, mask in masks.items():
        bad = np.flatnonzero(mask & ~fmt.labelled(y))
        if bad.size:
            return f"vertex {lo + int(bad[0])} is in the {m} mask but unlabelled (label -1)"
        seen += mask
    both = np.flatnonzero(seen > 1)
    if both.size:
        v = int(both[0])
        inside = [m for m, mask in masks.items() if mask[v]]
        return f"masks overlap: vertex {lo + v} is in both the {inside[0]} and {inside[1]} masks"
    return None


def feature_block_rows(meta: GraphMeta) -> int:
    """Feature rows read per block: whole HDF5 chunks, about ``FEATURE_BLOCK_BYTES``."""
    chunk = fmt.feature_chunk_rows(meta.num_features, meta.feature_dtype.itemsize)
    row_bytes = meta.num_features * meta.feature_dtype.itemsize
    return max(chunk, FEATURE_BLOCK_BYTES // row_bytes // chunk * chunk)


# -- edge fingerprints -------------------------------------------------------------------
def edge_fingerprint(
    src: np.ndarray, dst: np.ndarray, num_nodes: int, weights: np.ndarray | None = None
) -> int:
    """Order-independent 64-bit fingerprint of the multiset of edges ``src[k] -> dst[k]``.

    Fingerprints of disjoint edge sets add up modulo ``2**64``, so a matrix can be
    fingerprinted block by block; ``A^T`` stored correctly has the fingerprint of ``A``
    when its entries are hashed as ``(column, row)``. With ``weights`` each edge's hash
    folds in the bit pattern of its weight as a float64 (``-0.0`` as ``0.0``), so equal
    weights hash alike whatever their stored width.
    """
    with np.errstate(over="ignore"):  # in place: the key and one temporary of its size
        key = src.astype(_U64)
        key *= _U64(num_nodes)
        key += dst.astype(np.int64, copy=False).view(_U64)
        mix_into(key)
        if weights is not None:
            key ^= (weights.astype(np.float64) + 0.0).view(_U64)
            mix_into(key)
        return int(key.sum(dtype=_U64))


# -- checks of a slice of rows, shared with the distributed check ----------------------------
def indptr_problem(name: str, ptr: np.ndarray, lo: int, n: int, nnz: int) -> str | None:
    """What is wrong with the slice ``ptr = indptr[lo : lo + len(ptr)]`` of a CSR, or ``None``.

    The slice must start at 0 if it is the first (``lo == 0``), never decrease, and end at
    ``nnz`` if it is the last (it reaches position ``n``). Slices that overlap by one
    position check the whole ``indptr`` between them.
    """
    if lo == 0 and ptr[0] != 0:
        return f"'{name}' starts at {ptr[0]}, expected 0"
    drops = np.flatnonzero(np.diff(ptr) < 0)
    if drops.size:
        r = int(drops[0])
        return (
            f"'{name}' is not monotone: it decreases from {ptr[r]} to {ptr[r + 1]} "
            f"between positions {lo + r} and {lo + r + 1}"
        )
    if lo + len(ptr) - 1 == n and ptr[-1] != nnz:
        return f"'{name}' ends at {ptr[-1]}, expected num_edges={nnz}"
    return None


def row_blocks(ptr: np.ndarray, lo: int) -> list[tuple[int, int]]:
    """Split rows ``[lo, lo + len(ptr) - 1)`` into blocks of at most ``EDGE_BLOCK`` entries.

    ``ptr`` is ``indptr[lo : hi + 1]`` (checked); a block also holds at most
    ``ROW_BLOCK`` rows, and a single longer row is one block.
    """
    rows = len(ptr) - 1
    blocks = []
    a = 0
    while a < rows:
        b = int(np.searchsorted(ptr, ptr[a] + EDGE_BLOCK, side="right")) - 1
        b = min(rows, a + ROW_BLOCK, max(b, a + 1))
        blocks.append((lo + a, lo + b))
        a = b
    return blocks


@dataclass
class CsrScan:
    """What a pass over the column indices of some rows of a CSR found.

    Every field is a sum over the blocks passed to :meth:`add`, so scans of disjoint row
    ranges (blocks, or the slices of different ranks) add up; the fingerprints modulo
    ``2**64``.

    Attributes
    ----------
    num_nodes
        Vertices of the graph (the fingerprints' key space).
    col_counts
        Entries per column (degrees in the transposed direction), counted only when given
        (O(num_nodes) memory, full validation only).
    offsets
        Partition offsets; when given, entries whose endpoints lie in different parts are
        counted in ``crossing``.
    weighted
        Whether the blocks' values are edge weights, fingerprinted in ``weights``.
    self_loops, duplicates, unsorted_rows, crossing
        Counts of stored self loops, repeated entries within a row, rows not sorted by
        column, and entries crossing parts.
    forward, backward
        :func:`edge_fingerprint` of the entries as ``(row, column)`` and as
        ``(column, row)``.
    weights
        The same two with each entry's weight folded in (``weighted`` only, else 0).

    """

    num_nodes: int
    col_counts: np.ndarray | None = None
    offsets: np.ndarray | None = None
    weighted: bool = False
    self_loops: int = 0
    duplicates: int = 0
    unsorted_rows: int = 0
    crossing: int = 0
    forward: int = 0
    backward: int = 0
    weights: tuple[int, int] = (0, 0)

    def add(self, lo: int, block: sp.csr_matrix) -> None:
        """Count and fingerprint the rows ``lo ..`` of ``block`` (a :meth:`GraphFile.read_csr`).

        With ``weighted``, the block is read with its weights (``weights=True``).
        """
        n = self.num_nodes
        cols = block.indices.astype(np.int64, copy=False)
        rows = np.repeat(np.arange(lo, lo + block.shape[0], dtype=np.int64), np.diff(block.indptr))
        if self.col_counts is not None:
            np.add.at(self.col_counts, cols, 1)
        self.self_loops += int(np.count_nonzero(rows == cols))
        same_row = rows[1:] == rows[:-1]
        step = np.diff(cols)
        unsorted = same_row & (step < 0)
        if unsorted.any():
            self.unsorted_rows += int(np.unique(rows[1:][unsorted]).size)
            order = np.lexsort((cols, rows))
            step = np.diff(cols[order])
        self.duplicates += int(np.count_nonzero(same_row & (step == 0)))
        del same_row, step, unsorted  # before the fingerprints' temporaries
        self.forward = (self.forward + edge_fingerprint(rows, cols, n)) & _MASK64
        self.backward = (self.backward + edge_fingerprint(cols, rows, n)) & _MASK64
        if self.weighted:
            fwd, bwd = self.weights
            self.weights = (
                (fwd + edge_fingerprint(rows, cols, n, block.data)) & _MASK64,
                (bwd + edge_fingerprint(cols, rows, n, block.data)) & _MASK64,
            )
        if self.offsets is not None:
            part_r = np.searchsorted(self.offsets, rows, side="right")
            part_c = np.searchsorted(self.offsets, cols, side="right")
            self.crossing += int(np.count_nonzero(part_r != part_c))


def edges_problem(
    directed: bool, forward: int, backward: int, weights: tuple[int, int] = (0, 0)
) -> str | None:
    """Whether the edge sets agree, from :class:`CsrScan` fingerprints of the whole graph.

    ``forward``: ``A``'s entries as ``(row, column)``; ``backward``: the entries of ``A^T``
    (directed) or of ``A`` itself (undirected) as ``(column, row)``. Equal for a valid
    file; a difference means ``A^T`` is not the transpose of ``A`` or ``A`` is not
    symmetric. ``weights``: the same two fingerprints with the edge weights folded in
    (:attr:`CsrScan.weights`), equal when the weights agree too.
    """
    if forward != backward and directed:
        return f"'{fmt.ADJACENCY_T}' is not the transpose of '{fmt.ADJACENCY}' (the edges differ)"
    if forward != backward:
        return (
            f"'{fmt.ADJACENCY}' of an undirected graph is not symmetric "
            "(some edge i -> j has no j -> i)"
        )
    if weights[0] != weights[1] and directed:
        return (
            f"'{fmt.ADJACENCY_T}/{fmt.DATA}' is not the transpose of '{fmt.ADJACENCY}/{fmt.DATA}'"
            " (some edge has another weight in A^T)"
        )
    if weights[0] != weights[1]:
        return (
            f"'{fmt.ADJACENCY}' of an undirected graph is not symmetric in its weights "
            "(some edge has w(i, j) != w(j, i))"
        )
    return None


def first_duplicate(ids: np.ndarray) -> int | None:
    """The smallest value that occurs more than once in ``ids``, or ``None``."""
    ids = np.sort(ids)
    dup = np.flatnonzero(ids[1:] == ids[:-1])
    return int(ids[dup[0]]) if dup.size else None


def node_ids_problem(duplicates: Iterable[int | None]) -> str | None:
    """Original vertex ids must be unique: ``duplicates`` are :func:`first_duplicate` of parts.

    The parts must hold every occurrence of the ids they hold (the whole array, or the
    ids routed to each rank by value).
    """
    found = [d for d in duplicates if d is not None]
    if not found:
        return None
    return f"'{fmt.NODE_IDS}' is not unique: original id {min(found)} occurs more than once"


def id_range_problem(name: str, lo: int, hi: int, n: int) -> str | None:
    """Vertex ids of dataset ``name`` must lie in ``[0, n)``; ``lo``, ``hi``: their min and max."""
    if lo < 0 or hi >= n:
        return f"'{name}' has vertex id {lo if lo < 0 else hi} out of range [0, {n})"
    return None


@dataclass(frozen=True)
class IdCounts:
    """How often the ids of one range occur in some values (a summary that merges).

    Attributes
    ----------
    missing
        The smallest id of the range that does not occur, or ``None``.
    top_id, top_count
        The smallest id occurring most often, and how often (0 for an empty range).

    """

    missing: int | None
    top_id: int
    top_count: int

    @classmethod
    def of(cls, values: np.ndarray, lo: int, hi: int) -> IdCounts:
        """Count ``values``, all in ``[lo, hi)``, over the ids ``lo .. hi - 1``."""
        counts = np.bincount(values - lo, minlength=hi - lo)
        if not counts.size:
            return cls(None, lo, 0)
        absent = np.flatnonzero(counts == 0)
        top = int(np.argmax(counts))
        return cls(lo + int(absent[0]) if absent.size else None, lo + top, int(counts[top]))


def permutation_problem(name: str, n: int, parts: Iterable[IdCounts]) -> str | None:
    """Values in ``[0, n)`` must be a permutation of ``0 .. n - 1``.

    ``parts`` are the :class:`IdCounts` of ranges of ids that together cover ``[0, n)``,
    each counted over every value in it.
    """
    parts = list(parts)
    missing = [p.missing for p in parts if p.missing is not None]
    if not missing:
        return None
    top = max(p.top_count for p in parts)
    top_id = min(p.top_id for p in parts if p.top_count == top)
    return (
        f"'{name}' is not a permutation of 0..{n - 1}: id {min(missing)} is missing "
        f"(id {top_id} occurs {top} times)"
    )


# -- full validation ----------------------------------------------------------------------
@dataclass
class _AdjacencyStats:
    out_degree: DegreeSummary
    in_degree: DegreeSummary | None
    isolated: int
    self_loops: int
    duplicates: int
    unsorted_rows: int
    edge_cut: int
    part_edges: tuple[int, ...] | None


@dataclass
class _VertexStats:
    class_counts: np.ndarray  # [unlabelled, class 0, class 1, ...]
    split_sizes: dict[str, int]


class _Validator:
    """One validation run over an open :class:`GraphFile`."""

    def __init__(self, gf: GraphFile, show_progress: bool) -> None:
        self.gf = gf
        self.meta = gf.meta
        self.n = gf.meta.num_nodes
        self.nnz = gf.meta.num_edges
        self.show_progress = show_progress
        self.warnings: list[str] = []

    def fail(self, what: str) -> InputError:
        return InputError(f"{self.meta.path}: {what}")

    # -- CSR -------------------------------------------------------------------------------
    def indptr(self, group: str, transpose: bool) -> np.ndarray:
        """Read and check the whole ``indptr`` of ``group`` (O(num_nodes) int64)."""
        n = self.n
        ptr = np.empty(n + 1, dtype=np.int64)
        for lo in range(0, n + 1, ROW_BLOCK):
            hi = min(n + 1, lo + ROW_BLOCK)
            ptr[lo:hi] = self.gf.read_indptr(lo, hi - 1, transpose)
        problem = indptr_problem(f"{group}/{fmt.INDPTR}", ptr, 0, n, self.nnz)
        if problem:
            raise self.fail(problem)
        return ptr

    def scan(
        self, group: str, ptr: np.ndarray, transpose: bool, offsets: np.ndarray | None
    ) -> CsrScan:
        """Stream the column indices of one CSR; count and fingerprint its entries."""
        weighted = self.meta.weighted
        res = CsrScan(self.n, col_counts=np.zeros(self.n, dtype=np.int64), offsets=offsets,
                      weighted=weighted)
        with Progress(f"checking {group}", self.nnz, "edges", enabled=self.show_progress) as bar:
            for lo, hi in row_blocks(ptr, 0):
                block = self.gf.read_csr(lo, hi, transpose, weights=weighted)
                res.add(lo, block)
                bar.update(block.nnz)
        return res

    def adjacency(self) -> _AdjacencyStats:
        """Check ``A`` (and ``A^T``); return degrees, counts and the edge cut."""
        meta = self.meta
        offsets = (
            np.asarray(meta.partition_offsets, dtype=np.int64)
            if meta.partition_offsets is not None else None
        )
        ptr = self.indptr(fmt.ADJACENCY, transpose=False)
        out_deg = np.diff(ptr)
        a = self.scan(fmt.ADJACENCY, ptr, transpose=False, offsets=offsets)
        in_counts = a.col_counts
        assert in_counts is not None
        if meta.directed:
            ptr_t = self.indptr(fmt.ADJACENCY_T, transpose=True)
            in_deg = np.diff(ptr_t)
            wrong = np.flatnonzero(in_deg != in_counts)
            if wrong.size:
                v = int(wrong[0])
                raise self.fail(
                    f"'{fmt.ADJACENCY_T}' is not the transpose of '{fmt.ADJACENCY}': vertex {v} "
                    f"has {in_counts[v]} in-edges in A but {in_deg[v]} entries in its row of A^T"
                )
            del in_counts
            a.col_counts = None  # free the per-vertex counts
            t = self.scan(fmt.ADJACENCY_T, ptr_t, transpose=True, offsets=None)
            assert t.col_counts is not None
            wrong = np.flatnonzero(t.col_counts != out_deg)
            if wrong.size:
                v = int(wrong[0])
                raise self.fail(
                    f"'{fmt.ADJACENCY_T}' is not the transpose of '{fmt.ADJACENCY}': vertex {v} "
                    f"has {out_deg[v]} out-edges in A but appears in {t.col_counts[v]} "
                    "rows of A^T"
                )
            backward, weights = t.backward, (a.weights[0], t.weights[1])
            isolated = int(np.count_nonzero((out_deg == 0) & (in_deg == 0)))
            in_summary: DegreeSummary | None = DegreeSummary.of(in_deg)
            cut = a.crossing
        else:
            wrong = np.flatnonzero(out_deg != in_counts)
            if wrong.size:
                v = int(wrong[0])
                raise self.fail(
                    f"'{fmt.ADJACENCY}' of an undirected graph is not symmetric: vertex {v} "
                    f"has {out_deg[v]} neighbours in its row but appears in {in_counts[v]} rows"
                )
            backward, weights = a.backward, a.weights
            isolated = int(np.count_nonzero(out_deg == 0))
            in_summary = None
            cut = a.crossing // 2
        problem = edges_problem(meta.directed, a.forward, backward, weights)
        if problem:
            raise self.fail(problem)
        part_edges = None
        if offsets is not None:
            part_edges = tuple(int(x) for x in np.diff(ptr[offsets]))
        return _AdjacencyStats(
            out_degree=DegreeSummary.of(out_deg), in_degree=in_summary, isolated=isolated,
            self_loops=a.self_loops, duplicates=a.duplicates, unsorted_rows=a.unsorted_rows,
            edge_cut=cut, part_edges=part_edges,
        )

    # -- vertex data -----------------------------------------------------------------------
    def features(self) -> None:
        """Stream the feature matrix; the reader rejects NaN and Inf naming the vertex."""
        rows = feature_block_rows(self.meta)
        with Progress("checking features", self.n, "rows", enabled=self.show_progress) as bar:
            for lo in range(0, self.n, rows):
                hi = min(self.n, lo + rows)
                self.gf.read_features(lo, hi)
                bar.update(hi - lo)

    def labels_and_masks(self) -> _VertexStats:
        """Check label range, labelled masks and disjoint masks; count classes and splits."""
        # hist[0] counts unlabelled vertices; it grows to the largest label present only, so
        # a file declaring millions of classes costs no more than its labels
        hist = np.zeros(1, dtype=np.int64)
        sizes = dict.fromkeys(fmt.MASK_NAMES, 0)
        for lo in range(0, self.n, ROW_BLOCK):
            hi = min(self.n, lo + ROW_BLOCK)
            y = self.gf.read_labels(lo, hi)
            if y.ndim == 2:  # multi-label: every vertex labelled, the positives per class
                counts = np.concatenate([[0], y.sum(axis=0, dtype=np.int64)])
            else:
                counts = np.bincount(y + 1)
            hist = np.pad(hist, (0, max(0, len(counts) - len(hist))))
            hist[: len(counts)] += counts
            masks = {m: self.gf.read_mask(m, lo, hi) for m in fmt.MASK_NAMES}
            for m, mask in masks.items():
                sizes[m] += int(np.count_nonzero(mask))
            problem = mask_problem(y, masks, lo)
            if problem:
                raise self.fail(problem)
        if not sizes["train"]:  # what hpcgnn train and sample refuse, refused here already
            raise self.fail("the train mask is empty: no vertex to train on")
        return _VertexStats(class_counts=hist, split_sizes=sizes)

    def node_ids(self) -> None:
        """Original vertex ids must be unique."""
        problem = node_ids_problem([first_duplicate(self.gf.read_node_ids(0, self.n))])
        if problem:
            raise self.fail(problem)

    def partition_perm(self) -> None:
        """``perm`` must be a permutation of ``0 .. num_nodes - 1``."""
        perm = self.gf.read_partition_perm()
        name = f"{fmt.PARTITION}/{fmt.PART_PERM}"
        problem = id_range_problem(name, int(perm.min()), int(perm.max()), self.n)
        problem = problem or permutation_problem(name, self.n, [IdCounts.of(perm, 0, self.n)])
        if problem:
            raise self.fail(problem)

    def stored_edge_cut(self) -> int | None:
        """Return the ``edge_cut`` attribute recorded by ``hpcgnn partition``, if any."""
        perm = self.gf.dataset(f"{fmt.PARTITION}/{fmt.PART_PERM}", (self.n,), "iu")
        value = perm.parent.attrs.get("edge_cut")
        return None if value is None else int(value)

    # -- driver ----------------------------------------------------------------------------
    def run(self) -> GraphReport:
        meta = self.meta
        adj = self.adjacency()
        self.features()
        lm = self.labels_and_masks()
        self.node_ids()
        partition = None
        if meta.partition_offsets is not None:
            self.partition_perm()
            offsets = np.asarray(meta.partition_offsets, dtype=np.int64)
            partition = PartitionSummary(
                method=meta.partition_method or "",
                sizes=tuple(int(x) for x in np.diff(offsets)),
                edges=adj.part_edges or (),
                edge_cut=adj.edge_cut,
            )
            stored = self.stored_edge_cut()
            if stored is not None and stored != partition.edge_cut:
                self.warnings.append(
                    f"recorded edge cut {stored} differs from the recomputed {partition.edge_cut}"
                )
        if adj.self_loops:
            self.warnings.append(
                f"{adj.self_loops} self loops stored (the GCN normalisation adds them anyway)"
            )
        if adj.duplicates:
            self.warnings.append(f"{adj.duplicates} duplicate entries in '{fmt.ADJACENCY}'")
        if adj.unsorted_rows:
            self.warnings.append(
                f"{adj.unsorted_rows} rows of '{fmt.ADJACENCY}' are not sorted by column"
            )
        undirected = None
        if not meta.directed:
            loops = adj.self_loops
            undirected = (meta.num_edges - loops) // 2 + loops
        hist = lm.class_counts
        return GraphReport(
            meta=meta,
            undirected_edges=undirected,
            train=lm.split_sizes["train"],
            val=lm.split_sizes["val"],
            test=lm.split_sizes["test"],
            unlabelled=int(hist[0]),
            class_histogram=tuple(int(x) for x in hist[1:]),
            out_degree=adj.out_degree,
            in_degree=adj.in_degree,
            isolated=adj.isolated,
            self_loops=adj.self_loops,
            duplicates=adj.duplicates,
            unsorted_rows=adj.unsorted_rows,
            partition=partition,
            warnings=tuple(self.warnings),
        )


def validate_file(path: str | os.PathLike, show_progress: bool = True) -> GraphReport:
    """Check every part of a graph file and compute its statistics.

    Parameters
    ----------
    path
        The ``.h5`` file to check.
    show_progress
        Show progress bars on stderr for long passes.

    Returns
    -------
    GraphReport
        Statistics of the file, which is valid.

    Raises
    ------
    InputError
        On the first problem found, with a one-line message ``"<path>: <what is wrong>"``.

    """
    with GraphFile(path) as gf:
        try:
            return _Validator(gf, show_progress).run()
        except OSError as err:
            text = " ".join(str(err).split())
            raise InputError(f"{gf.path}: cannot read the file (truncated or corrupt?): {text}") \
                from err

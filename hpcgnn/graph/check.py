"""The cheap structural checks of a graph file, distributed over the ranks; its content fingerprint.

``hpcgnn train`` (every mode) and ``hpcgnn sample`` call :func:`check_graph` before they
build a model or a sampler, so a file that ``hpcgnn info`` rejects for its structure
never trains. Rank ``r`` of ``P`` scans the rows ``[o_r, o_{r+1})`` of an even split
(O(nnz/P + n/P) reads, O(n/P) memory plus one block of edges) and the ranks combine what
they found with a few collectives:

* each ``indptr`` (``A``, and ``A^T`` if directed) starts at 0, never decreases and ends
  at ``num_edges`` (the slices overlap by one entry); every column index is in ``[0, n)``;
* an undirected ``A`` is symmetric, a directed file's ``adjacency_t`` is the transpose of
  ``A``: the order-independent edge fingerprints of the entries as ``(row, column)`` and
  as ``(column, row)``, summed over the ranks, agree;
* edge weights (a weighted file): finite (the reads refuse NaN and Inf), and symmetric or
  transposed with the edges: the same fingerprints with each entry's weight folded in;
* labels lie in ``[-1, C)`` (a multi-label file's 0/1 matrix: 0 or 1, every vertex
  labelled), every vertex of a mask is labelled, the masks are disjoint;
* ``node_ids`` are unique: every id is sent to rank ``hash(id) mod P`` (one all-to-all),
  which looks for repeats;
* ``partition/perm`` is a permutation of ``0 .. n-1``: its range by a min / max
  all-reduce, then every value is sent to the rank owning its range of ids, which counts.

The per-slice logic is :mod:`hpcgnn.io.validate`'s (``indptr_problem``, ``CsrScan``,
``edges_problem``, ``mask_problem``, ``node_ids_problem``, ``IdCounts``,
``permutation_problem``), so a problem is reported with the line ``info`` prints for it,
on every rank. Only ``info`` runs the checks that need O(n) memory on one process or are
statistics: per-vertex degree comparisons (so ``train`` reports an asymmetric or wrongly
transposed adjacency by the fingerprint, without naming a vertex), the class histogram,
degree summaries, the partition's edge cut and balance, and the warnings (self loops,
duplicate entries, unsorted rows, a recorded edge cut that differs). NaN or Inf features
are refused by the reads of the models (or of this check when it fingerprints features:
``train`` with checkpoints, and ``sample``, which reads no features otherwise).

With ``content=True`` the same pass also returns the graph's *content fingerprint*: the
sums over ranks of order-independent hashes of the edges (with their weights, if any),
labels, masks, node ids, partition and features, so it does not depend on the number of
ranks. Checkpoints record it (:mod:`hpcgnn.training.checkpoint`); the features are read for
it only then.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import ExitStack

import numpy as np
from mpi4py import MPI

from hpcgnn.comm.collective import collective
from hpcgnn.comm.communicator import Comm
from hpcgnn.errors import InputError
from hpcgnn.io import format as fmt
from hpcgnn.io.memory import GraphReader, GraphSource, MemoryGraph, open_graph
from hpcgnn.io.reader import GraphMeta
from hpcgnn.io.validate import (
    CsrScan,
    IdCounts,
    edges_problem,
    feature_block_rows,
    first_duplicate,
    id_range_problem,
    indptr_problem,
    mask_problem,
    node_ids_problem,
    permutation_problem,
    row_blocks,
)
from hpcgnn.layout.blocks import even_offsets, owner_of
from hpcgnn.rng import mix, mix_into

#: Communication category of the check (before training; not part of any epoch).
CATEGORY = "check"
#: What the content fingerprint sums, in the order of the summed array.
PARTS = ("edges", "labels", "masks", "node_ids", "perm", "features")
_U64 = np.uint64
_MASK64 = (1 << 64) - 1
#: Elements hashed at a time by :func:`rows_fingerprint` (two 8-byte temporaries each):
#: a feature block hashed at once held five 8-byte copies of every value (366 MiB for
#: 150,000 x 64 float32 features, more than the model they train).
HASH_CHUNK = 1 << 20


def rows_fingerprint(values: np.ndarray, lo: int) -> int:
    """Order-independent 64-bit fingerprint of rows ``lo ..`` of a per-vertex array.

    Every element is hashed with its global position and its bit pattern; fingerprints
    of disjoint row ranges add up modulo ``2**64``, so any split of the rows over ranks
    gives the same sum.
    """
    a = np.ascontiguousarray(values)
    width = int(np.prod(a.shape[1:], dtype=np.int64))
    bits = a.reshape(-1).view(f"u{a.dtype.itemsize}")
    first, total = lo * width, 0
    for start in range(0, bits.size, HASH_CHUNK):  # in place, HASH_CHUNK keys at a time
        stop = min(bits.size, start + HASH_CHUNK)
        key = mix_into(np.arange(first + start, first + stop, dtype=_U64))
        key ^= bits[start:stop]
        total = (total + int(mix_into(key).sum(dtype=_U64))) & _MASK64
    return total


def check_graph(comm: Comm, path: GraphSource, content: bool = False) -> str | None:
    """Run the cheap structural checks of the module docstring (collective).

    Parameters
    ----------
    comm
        Every rank of the run; each scans ``1 / comm.size`` of the rows.
    path
        The graph file, or a graph in memory (:class:`~hpcgnn.io.memory.MemoryGraph`):
        checked the same way, after the ranks agree that they hold the same graph
        (:meth:`~hpcgnn.io.memory.MemoryGraph.digest`).
    content
        Also read the features and return the content fingerprint.

    Returns
    -------
    str or None
        The content fingerprint (16 hex digits, the same for any number of ranks) when
        ``content``, else ``None``; the same on every rank.

    Raises
    ------
    InputError
        On every rank, with ``info``'s line ``"<path>: <what is wrong>"``.
    """
    if isinstance(path, MemoryGraph):
        _same_graph(comm, path)
    with ExitStack() as stack:
        with collective(comm):  # a file that does not open fails on every rank
            gf = stack.enter_context(open_graph(path))
        return _Check(comm, gf).run(content)


def _same_graph(comm: Comm, graph: MemoryGraph) -> None:
    """Refuse, on every rank, a graph in memory that differs between the ranks."""
    with collective(comm):
        mine = graph.digest()
    digests = comm.allgather_obj(mine, CATEGORY)
    other = next((r for r, d in enumerate(digests) if d != digests[0]), None)
    if other is not None:
        raise InputError(
            f"{graph.meta.path}: the graph in memory differs between ranks (rank {other}'s is"
            " not rank 0's): build it the same way on every rank (same arrays, same seed)",
            collective=True,
        )


class _Check:
    """One distributed check of an open file: this rank's slice of rows and the sums."""

    def __init__(self, comm: Comm, gf: GraphReader) -> None:
        self.comm, self.gf, self.meta = comm, gf, gf.meta
        self.n = gf.meta.num_nodes
        self.offsets = even_offsets(self.n, comm.size)
        self.lo, self.hi = (int(v) for v in self.offsets[comm.rank : comm.rank + 2])
        self.sums = dict.fromkeys(PARTS, 0)

    def fail(self, problem: str) -> InputError:
        return InputError(f"{self.meta.path}: {problem}", collective=True)

    def add(self, part: str, value: int) -> None:
        self.sums[part] = (self.sums[part] + value) & _MASK64

    def run(self, content: bool) -> str | None:
        meta, gf, lo, hi = self.meta, self.gf, self.lo, self.hi
        partitioned = meta.partition_offsets is not None
        transposes = (False, True) if meta.directed else (False,)
        with collective(self.comm):
            ptrs = [self.indptr(t) for t in transposes]
            self.vertex_data()
            ids = gf.read_node_ids(lo, hi)
            self.add("node_ids", rows_fingerprint(ids, lo))
            perm = gf.read_partition_perm(lo, hi) if partitioned else None
            if perm is not None:
                self.add("perm", rows_fingerprint(perm, lo))
        duplicate = first_duplicate(self.route(ids, mix(ids.view(_U64)) % _U64(self.comm.size)))
        counts = self.permutation(perm) if perm is not None else None
        with collective(self.comm):
            scans = [self.scan(ptr, t) for ptr, t in zip(ptrs, transposes, strict=True)]
            if content:
                self.features()
        self.add("edges", scans[0].weights[0] if meta.weighted else scans[0].forward)
        edges = [scans[0].forward, scans[-1].backward, scans[0].weights[0], scans[-1].weights[1]]
        sums = np.array([self.sums[p] for p in PARTS] + edges, dtype=_U64)
        self.comm.allreduce(sums, CATEGORY)
        found = self.comm.allgather_obj((duplicate, counts), CATEGORY)
        forward, backward, fwd_w, bwd_w = (int(v) for v in sums[len(PARTS) :])
        problem = edges_problem(meta.directed, forward, backward, (fwd_w, bwd_w))
        problem = problem or node_ids_problem(d for d, _ in found)
        if partitioned:
            name = f"{fmt.PARTITION}/{fmt.PART_PERM}"
            problem = problem or permutation_problem(name, self.n, (c for _, c in found))
        if problem:
            raise self.fail(problem)
        return _digest(meta, sums[: len(PARTS)]) if content else None

    # -- this rank's slice --------------------------------------------------------------
    def indptr(self, transpose: bool) -> np.ndarray:
        """This slice of ``indptr`` (one entry more than the rows), checked."""
        group = fmt.ADJACENCY_T if transpose else fmt.ADJACENCY
        ptr = self.gf.read_indptr(self.lo, self.hi, transpose)
        problem = indptr_problem(
            f"{group}/{fmt.INDPTR}", ptr, self.lo, self.n, self.meta.num_edges
        )
        if problem:
            raise self.fail(problem)
        return ptr

    def vertex_data(self) -> None:
        """Labels and masks of the slice: range, labelled masks, disjoint masks; hashed."""
        lo, hi = self.lo, self.hi
        y = self.gf.read_labels(lo, hi)
        masks = {m: self.gf.read_mask(m, lo, hi) for m in fmt.MASK_NAMES}
        problem = mask_problem(y, masks, lo)
        if problem:
            raise self.fail(problem)
        self.add("labels", rows_fingerprint(y, lo))
        self.add("masks", rows_fingerprint(np.stack(list(masks.values()), axis=1), lo))

    def scan(self, ptr: np.ndarray, transpose: bool) -> CsrScan:
        """Fingerprint the slice's rows of ``A`` (or ``A^T``) block by block, with weights."""
        weighted = self.meta.weighted
        res = CsrScan(self.n, weighted=weighted)
        for a, b in row_blocks(ptr, self.lo):
            res.add(a, self.gf.read_csr(a, b, transpose, weights=weighted))
        return res

    def features(self) -> None:
        """Hash the slice's feature rows block by block (the reader refuses NaN and Inf)."""
        rows = feature_block_rows(self.meta)
        for a in range(self.lo, self.hi, rows):
            x = self.gf.read_features(a, min(self.hi, a + rows))
            self.add("features", rows_fingerprint(x, a))

    # -- across ranks -------------------------------------------------------------------
    def route(self, values: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Send each value to rank ``owner`` (one all-to-all); return what this rank got."""
        owner = owner.astype(np.int64)
        order = np.argsort(owner, kind="stable")
        counts = np.bincount(owner, minlength=self.comm.size)
        got, _ = self.comm.alltoallv(values[order], counts, CATEGORY)
        return got

    def permutation(self, perm: np.ndarray) -> IdCounts:
        """Check the range of ``perm`` (collective), count the ids this rank owns."""
        ends = np.array([perm.min(), -perm.max()] if perm.size else [0, 0], dtype=np.int64)
        self.comm.allreduce(ends, CATEGORY, op=MPI.MIN)
        name = f"{fmt.PARTITION}/{fmt.PART_PERM}"
        problem = id_range_problem(name, int(ends[0]), int(-ends[1]), self.n)
        if problem:
            raise self.fail(problem)
        mine = self.route(perm, owner_of(perm, self.offsets))
        return IdCounts.of(mine, self.lo, self.hi)


def _digest(meta: GraphMeta, sums: np.ndarray) -> str:
    """16 hex digits of SHA-256 over the header and the summed fingerprints."""
    head = {
        k: str(getattr(meta, k)) for k in (
            "num_nodes", "num_edges", "num_features", "num_classes", "directed",
            "feature_dtype", "partition_offsets",
        )
    }
    if meta.multi_label:  # only then: every other file keeps the fingerprint it had
        head["multi_label"] = "True"
    h = hashlib.sha256(json.dumps(head, sort_keys=True).encode())
    h.update(sums.astype("<u8").tobytes())
    return h.hexdigest()[:16]

"""Hierarchical METIS (nodes first, then ranks) and the cut across and within nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from hpcgnn.cli.common import launched_by_mpi
from hpcgnn.cli.main import main
from hpcgnn.errors import ConfigError
from hpcgnn.io import GraphFile
from hpcgnn.partition.hierarchy import Hierarchy, hierarchical_partition, level_cuts
from hpcgnn.partition.methods import metis_partition
from tests.graphs import random_graph_arrays, write_graph_arrays

serial = pytest.mark.skipif(launched_by_mpi(), reason="serial test; MPI tests cover mpiexec")


def undirected(n: int, src: np.ndarray, dst: np.ndarray) -> sp.csr_matrix:
    """``A`` of the undirected graph with edges ``src[i] - dst[i]``, both directions stored."""
    a = sp.coo_matrix((np.ones(2 * len(src)), (np.r_[src, dst], np.r_[dst, src])), (n, n))
    a = a.tocsr()
    a.data[:] = 1.0
    return a


def two_level_sbm(nodes: int, ranks: int, size: int, seed: int) -> tuple[np.ndarray, ...]:
    """Edges of an SBM of ``nodes * ranks`` blocks of ``size``: dense in a block, sparser
    between blocks of one node (block ``b`` is on node ``b // ranks``), sparse across."""
    rng = np.random.default_rng(seed)
    n = nodes * ranks * size
    block = np.arange(n) // size
    i, j = np.triu_indices(n, 1)
    p = np.where(block[i] == block[j], 0.4,
                 np.where(block[i] // ranks == block[j] // ranks, 0.08, 0.005))
    keep = rng.random(len(i)) < p
    return i[keep], j[keep]


#: Up to 8 parts pymetis bisects recursively, so flat METIS already cuts a power-of-two
#: number of nodes first (equal cuts); k-way (more than 8 parts) and 3 nodes do not.
@pytest.mark.parametrize("nodes, ranks, strictly", [
    (2, 2, False), (2, 4, False), (4, 2, False), (3, 2, True), (4, 4, True),
])
@pytest.mark.parametrize("seed", [0, 1])
def test_fewer_edges_cross_nodes_than_flat_metis(
    nodes: int, ranks: int, strictly: bool, seed: int
) -> None:
    size = 24
    src, dst = two_level_sbm(nodes, ranks, size, seed)
    n = nodes * ranks * size
    a = undirected(n, src, dst)
    h = Hierarchy.of_shape(f"{nodes}x{ranks}")
    parts = hierarchical_partition(a, h, seed)
    flat = metis_partition(a, h.num_parts, seed)
    hier_cut, flat_cut = level_cuts(a, parts, h, False), level_cuts(a, flat, h, False)
    assert hier_cut.across_nodes <= flat_cut.across_nodes, (hier_cut, flat_cut)
    if strictly:
        assert hier_cut.across_nodes < flat_cut.across_nodes, (hier_cut, flat_cut)
    sizes = np.bincount(parts, minlength=h.num_parts)
    # METIS's default imbalance is 1.03 per level; two levels compound it
    assert sizes.min() > 0 and sizes.max() <= np.ceil(1.03**2 * n / h.num_parts), sizes
    node_sizes = np.bincount(np.asarray(h.node_of)[parts], minlength=nodes)
    assert node_sizes.max() <= np.ceil(1.03 * n / nodes), node_sizes


def test_ranks_of_a_topology_node_need_not_be_consecutive() -> None:
    src, dst = two_level_sbm(2, 2, 20, 3)
    a = undirected(80, src, dst)
    h = Hierarchy.of_topology((0, 1, 0, 1), "interleaved")
    parts = hierarchical_partition(a, h, 0)
    node = np.asarray(h.node_of)[parts]
    # the planted nodes are vertices 0..39 and 40..79: each lies on one topology node
    assert len(set(node[:40])) == 1 and len(set(node[40:])) == 1 and node[0] != node[40]
    assert sorted(set(parts[node == 0])) == [0, 2]


def test_level_cuts_are_exact_on_a_path() -> None:
    # path 0-1-...-7 in parts 0,0,1,1,2,2,3,3: the cut edges are 1-2, 3-4, 5-6
    a = undirected(8, np.arange(7), np.arange(1, 8))
    parts = np.repeat(np.arange(4), 2)
    cuts = level_cuts(a, parts, Hierarchy.of_shape("2x2"), directed=False)
    assert (cuts.across_nodes, cuts.within_nodes, cuts.total) == (1, 2, 3)
    cuts = level_cuts(a, parts, Hierarchy.of_shape("2x2"), directed=True)  # both arcs count
    assert (cuts.across_nodes, cuts.within_nodes) == (2, 4)
    cuts = level_cuts(a, parts, Hierarchy.of_topology((0, 1, 0, 1), "t"), directed=False)
    assert (cuts.across_nodes, cuts.within_nodes) == (3, 0)
    cuts = level_cuts(a, parts, Hierarchy.of_shape("1x4"), directed=False)
    assert (cuts.across_nodes, cuts.within_nodes) == (0, 3)


@pytest.mark.parametrize("spec", ["2", "0x4", "2x", "ax2", "2x2x2"])
def test_a_bad_hierarchy_is_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="NODESxRANKS"):
        Hierarchy.of_shape(spec)


def four_cliques(path: Path) -> Path:
    """Cliques of 4 on 0-3, 4-7, 8-11, 12-15; 0-3 and 4-7 joined by edges 0-4 and 1-5,
    8-11 and 12-15 by 8-12 and 9-13, and the two pairs by one edge 2-10."""
    clique = np.array([(i, j) for i in range(4) for j in range(i + 1, 4)])
    pairs = np.concatenate([clique + 4 * c for c in range(4)]
                           + [np.array([(0, 4), (1, 5), (8, 12), (9, 13), (2, 10)])])
    g = random_graph_arrays(n=16, features=3, classes=2)
    return write_graph_arrays(path, {**g, "src": pairs[:, 0], "dst": pairs[:, 1]})


def partition_cliques(tmp_path: Path, capsys, *flags: str) -> tuple[Path, list[str]]:
    """Partition :func:`four_cliques` with ``flags``; return the output and its lines."""
    src = four_cliques(tmp_path / "g.h5")
    out = tmp_path / "gp.h5"
    assert main(["partition", str(src), "--out", str(out), "--quiet", *flags]) == 0
    return out, capsys.readouterr().out.splitlines()


@serial
def test_cli_reports_the_cut_across_and_within_nodes(tmp_path: Path, capsys) -> None:
    out, lines = partition_cliques(tmp_path, capsys, "--parts", "4", "--hierarchy", "2x2")
    assert lines[0] == f"wrote {out}: 16 vertices in 4 parts by metis-hierarchical"
    assert lines[1].startswith("edge cut: 5 of 29 undirected edges")
    assert lines[3] == "hierarchy 2x2: 2 nodes, 4 ranks; undirected edges cut"
    assert lines[5].split() == ["hierarchical", "1", "4", "5"]
    flat = lines[6].split()
    assert flat[:2] == ["flat", "metis"] and int(flat[2]) >= 1
    with GraphFile(out) as g:
        assert list(g.meta.partition_offsets) == [0, 4, 8, 12, 16]
        perm = g.read_partition_perm()
    # each node holds one pair of joined cliques
    assert {frozenset(perm[:8] // 8), frozenset(perm[8:] // 8)} == {frozenset({0}),
                                                                     frozenset({1})}


@serial
@pytest.mark.parametrize("flags, message", [
    (["--hierarchy", "2x2", "--method", "block"], "--method metis only"),
    (["--hierarchy", "3x2"], "--parts 4 is not the 6 ranks of --hierarchy 3x2"),
    (["--hierarchy", "2x2", "--topology", "dgx1"], "not allowed with"),
])
def test_bad_hierarchy_flags_are_one_error_line(tmp_path: Path, capsys, flags, message) -> None:
    src = four_cliques(tmp_path / "g.h5")
    out = tmp_path / "gp.h5"
    try:
        rc = main(["partition", str(src), "--parts", "4", "--out", str(out), *flags])
    except SystemExit as exit_:  # argparse's own errors
        rc = int(exit_.code or 0)
    assert rc != 0
    assert message in capsys.readouterr().err
    assert not out.exists()


@serial
def test_topology_gives_the_nodes(tmp_path: Path, capsys) -> None:
    _, lines = partition_cliques(tmp_path, capsys, "--parts", "8", "--topology", "dgx1")
    assert lines[3] == "hierarchy dgx1: 2 nodes, 8 ranks; undirected edges cut"
    assert lines[5].split() == ["hierarchical", "1", "20", "21"]

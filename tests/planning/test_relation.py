import numpy as np

from hpcgnn.io.reader import GraphFile
from hpcgnn.planning import relation_from_edges, relation_from_file
from hpcgnn.planning.relation import signature_groups
from tests.graphs import random_graph_arrays, write_random_graph


def _brute(n, src, dst, offsets):
    part = [int(np.searchsorted(offsets, u, side="right") - 1) for u in range(n)]
    dests = [set() for _ in range(n)]
    for u, v in zip(src, dst, strict=True):
        if part[v] != part[u]:
            dests[u].add(part[v])
    return part, dests


def test_relation_matches_brute_force_with_small_row_blocks(tmp_path):
    g = random_graph_arrays(n=70, avg_degree=5, directed=True, seed=3)
    path = write_random_graph(tmp_path / "g.h5", n=70, avg_degree=5, directed=True, seed=3)
    offsets = np.array([0, 10, 33, 50, 70])
    with GraphFile(path) as gf:
        rel = relation_from_file(gf, offsets, block_rows=7)
        a = gf.read_csr(0, 70).tocoo()
    part, dests = _brute(70, a.row, a.col, offsets)
    assert rel.source.tolist() == part
    assert [set(rel.dests(u).tolist()) for u in range(len(rel.source))] == dests
    # the file stores the edges of the generator
    assert a.nnz >= len(set(zip(g["src"].tolist(), g["dst"].tolist(), strict=True))) - 70


def test_relation_from_edges_and_pair_counts():
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, 40, 200), rng.integers(0, 40, 200)
    offsets = np.array([0, 13, 27, 40])
    rel = relation_from_edges(40, src, dst, offsets)
    part, dests = _brute(40, src, dst, offsets)
    assert [set(rel.dests(u).tolist()) for u in range(len(rel.source))] == dests
    pc = rel.pair_counts()
    for i in range(3):
        for j in range(3):
            assert pc[i, j] == sum(1 for u in range(40) if part[u] == i and j in dests[u])
    assert np.all(np.diag(pc) == 0)


def test_relation_has_no_rank_cap():
    # 128 parts: beyond any 64-bit mask; ranks 64.. must survive
    rng = np.random.default_rng(1)
    n, parts = 512, 128
    src, dst = rng.integers(0, n, 900), rng.integers(0, n, 900)
    offsets = np.arange(0, n + 1, n // parts)
    rel = relation_from_edges(n, src, dst, offsets)
    part, dests = _brute(n, src, dst, offsets)
    assert rel.parts == parts and rel.source.tolist() == part
    assert [set(rel.dests(u).tolist()) for u in range(n)] == dests
    assert max(rel.dest_ranks) >= 64
    pc = rel.pair_counts()
    assert pc.shape == (parts, parts) and pc.sum() == sum(len(d) for d in dests)
    groups = signature_groups(rel)
    assert sum(len(ids) for _, _, ids in groups) == sum(1 for d in dests if d)
    for s, ds, ids in groups:
        assert all(part[u] == s and dests[u] == set(ds) for u in ids.tolist())
    # groups by source, then by the destination set read as a binary number
    keys = [(s, sum(1 << d for d in ds)) for s, ds, _ in groups]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)

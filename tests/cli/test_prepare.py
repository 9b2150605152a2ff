import numpy as np
import pytest

from hpcgnn.cli import main as cli
from hpcgnn.cli.common import launched_by_mpi
from hpcgnn.io import GraphFile


@pytest.fixture
def rank0():
    """Whether this process does the work (under mpiexec only rank 0 writes the file)."""
    if not launched_by_mpi():
        return True
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank() == 0


def test_prepare_synthetic(tmp_path, capsys, rank0):
    out = tmp_path / "sub" / "g.h5"
    argv = ["prepare", "synthetic", "--generator", "rmat", "--nodes", "300", "--avg-degree", "6",
            "--features", "4", "--classes", "3", "--seed", "2", "--out", str(out), "--quiet"]
    assert cli.main(argv) == 0
    if rank0:
        with GraphFile(out) as g:
            assert (g.meta.num_nodes, g.meta.num_features, g.meta.num_classes) == (300, 4, 3)
            assert g.meta.name == "rmat-n300-d6-f4-c3-s2"
        text = capsys.readouterr().out
        assert f"wrote {out}" in text and "vertices 300" in text
        assert "split: train 180, val 60, test 60" in text


def test_prepare_edgelist(tmp_path, capsys, rank0):
    edges = tmp_path / "e.txt"
    edges.write_text("# comment\n5 9\n9 12\n12 5\n")
    np.save(tmp_path / "y.npy", np.array([0, 1, 1]))
    out = tmp_path / "g.h5"
    argv = ["prepare", "edgelist", "--edges", str(edges), "--labels", str(tmp_path / "y.npy"),
            "--directed", "--feature-dim", "3", "--out", str(out)]
    assert cli.main(argv) == 0
    if rank0:
        with GraphFile(out) as g:
            assert g.meta.directed and g.meta.num_edges == 3 and g.meta.num_classes == 2
            assert g.read_node_ids(0, 3).tolist() == [5, 9, 12]
        assert "edges 3 (directed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["planetoid", "--root", "{tmp}", "--name", "cora"], "no Planetoid files ind.cora"),
        (["ogb", "--root", "{tmp}/missing"], "no such directory (OGB dataset root)"),
        (["edgelist", "--edges", "{tmp}/none.txt"], "none.txt: no such file (edge list)"),
        (["synthetic", "--train-frac", "0.9", "--val-frac", "0.5"], "exceeds 1"),
        (["synthetic", "--tmpdir", "{tmp}/nowhere"], "--tmpdir"),
        (["edgelist", "--edges", "{tmp}/none.txt", "--split", "given"],
         "--split given has no masks to take"),
        (["edgelist", "--edges", "{tmp}/none.txt", "--split", "{tmp}/s.txt"], "none.txt: no such"),
        (["pyg", "--file", "{tmp}/none.pt"], "none.pt: no such file"),
        (["npz", "--file", "{tmp}/none.npz", "--split", "per-class"], "none.npz: no such file"),
    ],
)
def test_errors_exit_1_with_one_line(tmp_path, capsys, argv, message):
    argv = ["prepare", *(a.replace("{tmp}", str(tmp_path)) for a in argv),
            "--out", str(tmp_path / "g.h5")]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("hpcgnn: error: ") and message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "g.h5").exists()


def test_prepare_a_weighted_edgelist(tmp_path, capsys, rank0):
    edges = tmp_path / "e.txt"
    edges.write_text("# u v w\n5 9 0.5\n9 12 2\n12 5 1\n9 5 0.25\n")
    out = tmp_path / "g.h5"
    argv = ["prepare", "edgelist", "--edges", str(edges), "--feature-dim", "3", "--out", str(out)]
    assert cli.main(argv) == 0
    if rank0:
        with GraphFile(out) as g:
            assert g.meta.weighted and g.meta.num_edges == 6
            assert g.read_csr(0, 3, weights=True)[0, 1] == 0.75  # 5-9 twice, summed
        text = capsys.readouterr().out
        assert "weighted edges 6 stored" in text and "weights of duplicates summed" in text


def test_prepare_a_mixed_edgelist_is_one_line(tmp_path, capsys):
    edges = tmp_path / "e.txt"
    edges.write_text("5 9 0.5\n9 12\n")
    argv = ["prepare", "edgelist", "--edges", str(edges), "--out", str(tmp_path / "g.h5")]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2: no weight, but the first line has one" in err
    assert not (tmp_path / "g.h5").exists()


def _row_sums(path):
    with GraphFile(path) as g:
        assert g.meta.feature_normalization == "row"
        return np.abs(g.read_features(0, g.meta.num_nodes)).sum(axis=1)


def test_row_normalize_on_every_source(tmp_path, capsys, rank0):
    from tests.prepare.test_ogb import fake_ogb

    fake_ogb(tmp_path / "arxiv")
    (tmp_path / "e.txt").write_text("0 1\n1 2\n2 3\n")
    np.save(tmp_path / "x.npy", np.array([[1, 3], [0, 0], [2, 2], [5, 0]], dtype=np.float32))
    sources = {
        "synthetic": ["--nodes", "50", "--features", "4"],
        "ogb": ["--root", str(tmp_path / "arxiv")],
        "edgelist": ["--edges", str(tmp_path / "e.txt"), "--features", str(tmp_path / "x.npy")],
    }
    for name, argv in sources.items():
        out = tmp_path / f"{name}.h5"
        assert cli.main(["prepare", name, *argv, "--row-normalize", "--quiet", "--out",
                         str(out)]) == 0
        if rank0:
            sums = _row_sums(out)
            np.testing.assert_allclose(sums[sums != 0], 1, rtol=1e-6)
    if rank0:
        np.testing.assert_array_equal(_row_sums(tmp_path / "edgelist.h5"), [1, 0, 1, 1])


def test_prepare_edgelist_takes_the_users_split(tmp_path, capsys, rank0):
    (tmp_path / "e.txt").write_text("5 9\n9 12\n12 5\n12 20\n")
    np.save(tmp_path / "y.npy", np.array([0, 1, 1, 0]))
    (tmp_path / "s.txt").write_text("train\ntest\n-\nval\n")
    out = tmp_path / "g.h5"
    argv = ["prepare", "edgelist", "--edges", str(tmp_path / "e.txt"), "--labels",
            str(tmp_path / "y.npy"), "--split", str(tmp_path / "s.txt"), "--out", str(out)]
    assert cli.main(argv) == 0
    if rank0:
        with GraphFile(out) as g:
            assert [g.read_mask(m, 0, 4).tolist() for m in ("train", "val", "test")] == [
                [True, False, False, False], [False, False, False, True],
                [False, True, False, False]]
        assert "split: train 1, val 1, test 1" in capsys.readouterr().out
    argv[-3] = "per-class"
    assert cli.main([*argv, "--train-per-class", "1", "--val-size", "1", "--test-size", "1"]) == 0
    if rank0:
        assert "split: train 2, val 1, test 1" in capsys.readouterr().out


def test_prepare_pyg_and_npz(tmp_path, capsys, rank0):
    import scipy.sparse as sp
    import torch

    from tests.prepare.test_pyg import graph_dict

    torch.save(graph_dict(), tmp_path / "d.pt")
    a = sp.random(30, 30, density=0.1, format="csr", random_state=0)
    a.data[:] = 1.0
    np.savez(tmp_path / "g.npz", adj_data=a.data, adj_indices=a.indices, adj_indptr=a.indptr,
             adj_shape=a.shape, attr_matrix=np.eye(30), labels=np.arange(30) % 2)
    runs = [["pyg", "--file", str(tmp_path / "d.pt")],
            ["npz", "--file", str(tmp_path / "g.npz"), "--split", "per-class",
             "--train-per-class", "5", "--val-size", "5", "--test-size", "10", "--seed", "4"]]
    for argv in runs:
        assert cli.main(["prepare", *argv, "--quiet", "--out", str(tmp_path / "g.h5")]) == 0
        if rank0:
            assert "wrote" in capsys.readouterr().out
    if rank0:
        with GraphFile(tmp_path / "g.h5") as g:
            assert g.meta.num_nodes == 30 and g.meta.source == f"npz:{tmp_path / 'g.npz'}"
            assert [g.read_mask(m, 0, 30).sum() for m in ("train", "val", "test")] == [10, 5, 10]
    torch.save([1], tmp_path / "bad.pt")
    assert cli.main(["prepare", "pyg", "--file", str(tmp_path / "bad.pt"), "--out",
                     str(tmp_path / "b.h5")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "torch.save(data.to_dict(), path)" in err

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

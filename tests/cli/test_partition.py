"""``hpcgnn partition``: output, errors, and the result seen by ``hpcgnn info``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hpcgnn.cli.common import launched_by_mpi
from hpcgnn.cli.main import main
from hpcgnn.io import GraphFile
from hpcgnn.partition import inverse_permutation
from tests.graphs import write_random_graph
from tests.mpi import assert_all, error_output

#: Serial tests call the CLI as one process; under an MPI launcher the CLI turns collective
#: and only rank 0 prints, so they are skipped there (the ``mpi`` test covers that path).
serial = pytest.mark.skipif(launched_by_mpi(), reason="serial test; MPI tests cover mpiexec")


@serial
@pytest.mark.parametrize("method", ["block", "random", "metis"])
def test_partition_prints_cut_and_balance(tmp_path: Path, capsys, method: str) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=80)
    out = tmp_path / "gp.h5"
    rc = main(["partition", str(src), "--parts", "4", "--method", method, "--out", str(out),
               "--seed", "2"])
    assert rc == 0
    text = capsys.readouterr().out
    assert f"wrote {out}: 80 vertices in 4 parts by {method}" in text
    assert "edge cut:" in text and "undirected edges" in text
    assert "balance:" in text
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert f"partition:   4 parts ({method})" in info
    assert info.rstrip().endswith("valid")


@serial
def test_directed_cut_counts_arcs(tmp_path: Path, capsys) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=40, directed=True)
    assert main(["partition", str(src), "-k", "2", "--out", str(tmp_path / "gp.h5")]) == 0
    assert "directed edges" in capsys.readouterr().out


@serial
@pytest.mark.parametrize("k", ["0", "41"])
def test_bad_part_count_is_one_error_line(tmp_path: Path, capsys, k: str) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=40)
    out = tmp_path / "gp.h5"
    assert main(["partition", str(src), "--parts", k, "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("hpcgnn: error: --parts")
    assert not out.exists()


@serial
def test_an_edge_balance_is_asked_of_metis(tmp_path: Path, capsys) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=80)
    out = tmp_path / "gp.h5"
    assert main(["partition", str(src), "-k", "2", "--balance", "edges", "--out",
                 str(out)]) == 0
    assert "balance:" in capsys.readouterr().out
    with GraphFile(out) as f:
        assert f.meta.partition_offsets is not None
    bad = tmp_path / "gr.h5"
    assert main(["partition", str(src), "-k", "2", "--method", "random", "--balance",
                 "edges", "--out", str(bad)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["hpcgnn: error: --balance edges needs --method metis (random balances "
                   "vertices)"] and not bad.exists()


@serial
def test_a_negative_seed_is_one_error_line(tmp_path: Path, capsys) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=40)
    out = tmp_path / "gp.h5"
    assert main(["partition", str(src), "--parts", "2", "--seed", "-1", "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["hpcgnn: error: --seed must be in [0, 2^63), got -1"] and not out.exists()


@serial
def test_output_must_differ_from_input(tmp_path: Path, capsys) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=40)
    assert main(["partition", str(src), "--parts", "2", "--out", str(src)]) == 1
    assert "--out" in capsys.readouterr().err


@serial
def test_invalid_input_is_rejected(tmp_path: Path, capsys) -> None:
    import h5py

    src = write_random_graph(tmp_path / "g.h5", n=40)
    with h5py.File(src, "r+") as h5:
        h5["labels"][3] = 9
    assert main(["partition", str(src), "--parts", "2", "--out", str(tmp_path / "o.h5")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "label 9 out of range" in err[0]
    assert not (tmp_path / "o.h5").exists()


@pytest.mark.mpi
def test_partition_under_mpi_runs_once_and_agrees(world, graph_file, capsys) -> None:
    src = graph_file("g.h5", n=50)
    out = src.with_name("gp.h5")
    rc = main(["partition", str(src), "--parts", "3", "--method", "metis", "--out", str(out)])
    printed = capsys.readouterr().out
    assert_all(world, rc == 0, f"rank {world.rank} returned {rc}")
    assert_all(world, ("edge cut:" in printed) == (world.rank == 0), "only rank 0 reports")
    rc = main(["partition", str(src), "--parts", "51", "--out", str(out)])
    err = error_output(world, capsys.readouterr().err)
    assert_all(world, rc == 1 and "--parts 51" in err, f"rank {world.rank}: {rc} {err!r}")
    assert_all(world, main(["info", str(out), "--json"]) == 0, "info on the output")


@serial
@pytest.mark.parametrize("directed", [False, True])
def test_partition_keeps_the_weights(tmp_path: Path, capsys, directed: bool) -> None:
    src = write_random_graph(tmp_path / "g.h5", n=60, directed=directed, weights=np.float32)
    out = tmp_path / "gp.h5"
    assert main(["partition", str(src), "-k", "3", "--method", "metis", "--out", str(out)]) == 0
    assert main(["info", str(out)]) == 0
    assert "weights:     stored" in capsys.readouterr().out
    with GraphFile(src) as f, GraphFile(out) as g:
        inv = inverse_permutation(g.read_partition_perm())
        for t in (False, True):
            old = f.read_csr(0, 60, t, weights=True).toarray()
            new = g.read_csr(0, 60, t, weights=True).toarray()
            np.testing.assert_array_equal(new[np.ix_(inv, inv)], old)


@serial
def test_a_large_partition_is_announced_before_metis_starts(tmp_path, capsys, monkeypatch):
    import hpcgnn.cli.partition as partition

    monkeypatch.setattr(partition, "LONG_PARTITION_EDGES", 1)  # as 2M edges would be
    src = write_random_graph(tmp_path / "g.h5", n=60)
    assert main(["partition", str(src), "--parts", "2", "--out", str(tmp_path / "p.h5")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(ln.startswith("partitioning 60 vertices, ") and ln.endswith(
        " into 2 parts by metis ...") for ln in err), err
    assert any("into 2 parts by metis: done in " in ln for ln in err), err

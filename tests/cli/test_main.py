"""The command line's last word: one line and the exit status for an interrupt."""

from __future__ import annotations

import os
import signal

import pytest

from hpcgnn.cli import prepare as prepare_cli
from hpcgnn.cli.common import launched_by_mpi
from hpcgnn.cli.main import main
from hpcgnn.utils import files

serial = pytest.mark.skipif(launched_by_mpi(), reason="signals itself; serial runs only")


@serial
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_is_one_line_and_128_plus_the_signal(sig, status, tmp_path, monkeypatch,
                                                      capsys):
    def interrupted(args):
        files.new_temporary(tmp_path, "left-by-a-step-that-had-no-clean-up-")
        os.kill(os.getpid(), sig)

    monkeypatch.setattr(prepare_cli, "_synthetic", interrupted)
    assert main(["prepare", "synthetic", "--out", str(tmp_path / "g.h5")]) == status
    assert capsys.readouterr().err == f"hpcgnn: interrupted by {signal.Signals(sig).name}\n"
    assert list(tmp_path.iterdir()) == []  # the last clean-up removed the temporary


@serial
def test_ctrl_c_outside_the_handlers_is_reported_the_same_way(tmp_path, monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare_cli, "_synthetic", interrupted)
    assert main(["prepare", "synthetic", "--out", str(tmp_path / "g.h5")]) == 130
    assert capsys.readouterr().err == "hpcgnn: interrupted by SIGINT\n"

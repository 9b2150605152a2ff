"""Text from files is printed with its control characters escaped."""

import h5py

from hpcgnn.cli.main import main
from hpcgnn.utils.text import printable
from tests.graphs import write_random_graph


def test_control_characters_are_escaped_and_the_rest_kept():
    assert printable("Cora · CiteSeer") == "Cora · CiteSeer"
    assert printable("a\x1b[31mb\nc\x07") == "a\\x1b[31mb\\nc\\x07"


def test_a_graph_name_cannot_reach_the_terminal_or_forge_a_line(tmp_path, capsys):
    path = write_random_graph(tmp_path / "g.h5", n=30, seed=1)
    with h5py.File(path, "r+") as f:
        f.attrs["name"] = "x\x1b[31mred\nhpcgnn: error: forged"
        f.attrs["source"] = "src\x07"
    for argv in (["info", str(path)], ["train", str(path), "--epochs", "1", "--quiet"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out
        assert not any(line.startswith("hpcgnn: error") for line in out.splitlines())
        assert "x\\x1b[31mred\\nhpcgnn: error: forged" in out

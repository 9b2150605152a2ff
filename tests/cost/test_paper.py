"""CAGNET's closed forms (hpcgnn/cost/paper.py) against the paper's equations, and the
advisor printing them beside ours."""

import json
import math

import pytest

from hpcgnn.cli.main import main
from hpcgnn.cost.paper import paper_words

N, NNZ = 1000, 9000


@pytest.mark.parametrize("p", [4, 8])
def test_equal_widths_give_the_papers_equations(p):
    """With one width f the sums are the paper's L (...) forms (the f^2 terms included)."""
    f, layers = 16, 3
    widths = [f] * (layers + 1)
    assert paper_words("1d", (p,), N, NNZ, widths) == layers * (2 * N * f + f * f)
    c = 2
    assert paper_words("1.5d", (p // c, c), N, NNZ, widths) == pytest.approx(
        layers * (2 * N * f / c + 2 * N * f * c / p + f * f))
    assert paper_words("2d", (2, p // 2), N, NNZ, widths) == pytest.approx(
        layers * (8 * N * f / math.sqrt(p) + 2 * NNZ / math.sqrt(p) + f * f))
    assert paper_words("3d", (2, 2, p // 4), N, NNZ, widths) == pytest.approx(
        layers * (2 * NNZ + 12 * N * f) / p ** (2 / 3))


def test_mixed_widths_move_each_layers_input_and_output():
    widths = [50, 8, 3]  # forward H^{l-1}, backward G^l, the f^{l-1} f^l all-reduce
    assert paper_words("1d", (4,), N, NNZ, widths) == (N * (50 + 8) + 50 * 8) + (
        N * (8 + 3) + 8 * 3)
    with pytest.raises(ValueError, match="no closed form"):
        paper_words("halo", (4,), N, NNZ, widths)


def test_the_advisor_prints_the_papers_volumes_beside_ours(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["model", "--shape", "5000,40000,64,8", "--procs", "4,8", "--formulas",
                 "paper", "--top", "40", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("paper: CAGNET's closed forms") == 2
    doc = json.loads(out.read_text())
    for res in doc["results"]:
        seen = {r["algo"] for r in res["choices"] if r["paper_bytes_per_rank"] is not None}
        assert seen == {"1d", "1.5d", "2d", "3d"}
        for r in res["choices"]:
            if r["algo"] == "1d":  # float32: 4 bytes a word
                want = 4 * paper_words("1d", (res["procs"],), 5000, 45000, [64, 16, 8])
                assert r["paper_bytes_per_rank"] == pytest.approx(want)

"""The full-batch layouts a test trains on, and what a run on them must equal."""

from __future__ import annotations

import pytest

#: Every full-batch layout that runs any layer: ``P`` stands for the rank count, ``Q`` for
#: half of it.
LAYOUTS = [["--algo", "1d"], ["--algo", "1.5d", "--replication", "2"],
           ["--algo", "halo", "--exchange", "p2p"], ["--algo", "halo", "--exchange", "planned"],
           ["--algo", "2d"], ["--algo", "2d", "--grid", "1xP"],
           ["--algo", "3d", "--grid", "1x1xP"], ["--algo", "3d", "--grid", "Qx1x2"]]


def layout_id(flags: list[str]) -> str:
    """A test id: the flags' values (``1.5d-2``, ``3d-Qx1x2``)."""
    return "-".join(flags[1::2])


def layout_flags(flags: list[str], ranks: int) -> list[str]:
    """``flags`` for ``ranks`` ranks (``P``, ``Q`` filled in); skips a grid that cannot fit."""
    if ranks % 2 and ("2" in flags or "Qx1x2" in flags):
        pytest.skip("a replication or a fiber of 2 needs an even rank count")
    return [a.replace("P", str(ranks)).replace("Q", str(ranks // 2)) for a in flags]


def assert_equal_run(doc: dict, want: list[float], control: bool = False) -> None:
    """``doc``'s losses are ``want`` within 1e-10 (float64) and every byte was predicted.

    ``control``: the mode predicts its control messages too (minibatch: the samples'
    counts), else they are left out.
    """
    got = [e["loss"] for e in doc["epochs"]]
    assert len(got) == len(want) and all(
        abs(a - b) <= 1e-10 for a, b in zip(got, want, strict=True)
    ), (got, want)
    measured, predicted = doc["comm"]["measured_bytes"], doc["comm"]["predicted_bytes"]
    assert {c: v for c, v in measured.items() if v and (control or c != "control")} == {
        c: v for c, v in predicted.items() if v
    }

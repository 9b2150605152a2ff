"""Device helpers of the tests: a communicator on the suite's device, and the ``gpu``
tests' one training run on the CPU and the same on the GPU."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from hpcgnn.backend import Device
from hpcgnn.cli.main import main
from hpcgnn.comm import Comm
from tests.mpi import assert_all


@contextmanager
def device_world(device: Device) -> Iterator[Comm]:
    """A duplicate of ``COMM_WORLD`` on ``device`` (the ``device`` fixture), freed after.

    The ``world`` fixture is a CPU communicator (the ``device`` fixture is chosen over
    it); code under test that allocates on ``comm.device`` takes this one instead.
    """
    comm = Comm.world(device=device)
    try:
        yield comm
    finally:
        comm.free()


def train_on_both_devices(world, tmp: Path, argv: list[str]) -> dict[str, dict]:
    """Run ``hpcgnn train *argv`` with ``--device cpu`` and ``--device cuda``; the metrics."""
    docs = {}
    for device in ("cpu", "cuda"):
        out = tmp / f"{device}.json"
        rc = main(["train", *argv, "--device", device, "--quiet", "--metrics", str(out)])
        assert_all(world, rc == 0, f"--device {device}: exit {rc}")
        world.mpi.Barrier()
        docs[device] = json.loads(out.read_text())
    return docs


def assert_same_training(docs: dict[str, dict], categories: tuple[str, ...]) -> None:
    """Losses within float32 tolerance, and equal bytes in ``categories`` on both devices."""
    cpu, cuda = docs["cpu"], docs["cuda"]
    assert cuda["device"]["kind"] == "cuda"
    np.testing.assert_allclose([e["loss"] for e in cuda["epochs"]],
                               [e["loss"] for e in cpu["epochs"]], rtol=1e-4, atol=1e-6)
    for c in categories:
        assert cuda["comm"]["measured_bytes"].get(c) == cpu["comm"]["measured_bytes"].get(c), c

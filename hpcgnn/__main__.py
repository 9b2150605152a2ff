"""``python -m hpcgnn`` is the ``hpcgnn`` command."""

from hpcgnn.cli.main import run

run()

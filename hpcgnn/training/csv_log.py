"""``--log-csv``: one CSV row per epoch, written as training runs (rank 0).

A spreadsheet or ``pandas.read_csv`` can follow a long run while it trains: the file is
started with the header (and a resumed run's history), then each epoch's row is appended
and flushed when the epoch ends. The columns are the metrics' ``epochs`` fields
(:class:`~hpcgnn.training.loop.EpochRecord`); an epoch without evaluation leaves its
accuracy and validation cells empty.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path
from typing import TextIO

from hpcgnn.training.loop import EpochRecord
from hpcgnn.utils.files import atomic_write, output_errors

#: The columns, in order: the fields of an epoch's record.
COLUMNS = tuple(f.name for f in dataclasses.fields(EpochRecord))


class CsvLog:
    """The CSV file of a run, with the rows of ``history`` already in it."""

    def __init__(self, path: str, history: list[EpochRecord]) -> None:
        self.path = Path(path)
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(COLUMNS)
        for rec in history:
            writer.writerow(_row(rec))
        atomic_write(self.path, text.getvalue(), "--log-csv")
        with output_errors(self.path, "--log-csv"):
            self._file: TextIO = open(self.path, "a", newline="")
        self._writer = csv.writer(self._file)

    def write(self, rec: EpochRecord) -> None:
        """Append the row of an epoch and flush it."""
        with output_errors(self.path, "--log-csv"):
            self._writer.writerow(_row(rec))
            self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def _row(rec: EpochRecord) -> list[object]:
    values = rec.as_dict()
    return ["" if values[c] is None else values[c] for c in COLUMNS]

"""Stream numeric text tables (CSV, SNAP edge lists), plain or gzip-compressed, in blocks.

Files of any size are read in blocks of about :data:`BLOCK_BYTES` of text, each parsed
with NumPy's C tokenizer, so memory holds one block at a time. A malformed line is
reported as an :class:`~hpcgnn.errors.InputError` naming the file and the line number.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np

from hpcgnn.errors import InputError
from hpcgnn.utils.files import os_reason
from hpcgnn.utils.progress import Progress

#: Bytes of text parsed at a time.
BLOCK_BYTES = 16 << 20

#: Line prefixes treated as comments (SNAP uses ``#``, KONECT and Matrix Market ``%``).
COMMENTS = ("#", "%")

#: Delimiter meaning "commas and/or whitespace".
ANY = "any"

_MIB = 1 << 20


def require_file(path: str | os.PathLike, what: str) -> Path:
    """Return ``path`` as a :class:`Path`, or raise :class:`InputError` if it is no file."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file ({what})")
    return p


def _data_lines(chunk: bytes, first_line: int) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` of the non-blank, non-comment lines of ``chunk``."""
    for offset, raw in enumerate(chunk.split(b"\n")):
        text = raw.decode("utf-8", errors="replace").strip()
        if text and not text.startswith(COMMENTS):
            yield first_line + offset, text


def _split(text: str, delimiter: str | None) -> list[str]:
    if delimiter == ANY:
        return text.replace(",", " ").split()
    return [f.strip() for f in text.split(delimiter)] if delimiter else text.split()


class NumericTable:
    """A numeric text table read block by block.

    Parameters
    ----------
    path
        The file; a name ending in ``.gz`` is decompressed on the fly.
    dtype
        Type of every value (``int64`` rejects non-integers such as ``1.5``).
    columns
        Exact number of values per line, or ``None`` to take it from the first line.
    first_columns
        Read only the first ``first_columns`` values of each line and ignore the rest
        (e.g. weights or timestamps after an edge); excludes ``columns``.
    delimiter
        ``","``, ``None`` for whitespace, or :data:`ANY` (``"any"``): commas and/or
        whitespace.
    what
        Description used in messages, e.g. ``"OGB edge list"``.
    block_bytes
        Bytes of text per block.

    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        dtype: np.dtype | type,
        columns: int | None = None,
        first_columns: int | None = None,
        delimiter: str | None = ANY,
        what: str = "numeric table",
        block_bytes: int = BLOCK_BYTES,
    ) -> None:
        if columns is not None and first_columns is not None:
            raise ValueError("give columns or first_columns, not both")
        self.path = require_file(path, what)
        self.dtype = np.dtype(dtype)
        self.columns = columns
        self.first_columns = first_columns
        self.delimiter = delimiter
        self.what = what
        self.block_bytes = block_bytes
        self.size = self.path.stat().st_size

    # -- raw blocks of whole lines -------------------------------------------------------
    def _open(self) -> tuple[BinaryIO, BinaryIO]:
        try:
            raw = open(self.path, "rb")
        except OSError as err:
            raise InputError(f"{self.path}: cannot read: {os_reason(err)} ({self.what})") from err
        if self.path.name.endswith(".gz"):
            # a GzipFile reads as a BinaryIO does; typeshed does not derive it from BinaryIO
            return raw, cast(BinaryIO, gzip.GzipFile(fileobj=raw, mode="rb"))
        return raw, raw

    def _chunks(self, progress: str | None, show_progress: bool) -> Iterator[tuple[int, bytes]]:
        """Yield ``(number of the first line, text of whole lines)``."""
        raw, stream = self._open()
        total = max(1, math.ceil(self.size / _MIB))
        line = 1
        shown = 0
        carry = b""
        with raw, stream, Progress(
            progress or "", total, "MiB", enabled=show_progress and progress is not None
        ) as bar:
            while True:
                try:
                    data = stream.read(self.block_bytes)
                except (OSError, EOFError, zlib.error) as err:
                    raise InputError(f"{self.path}: corrupt or truncated file: {err}") from err
                at_end = not data
                data = carry + data
                cut = len(data) if at_end else data.rfind(b"\n") + 1
                chunk, carry = data[:cut], data[cut:]
                if chunk:
                    if b"\r" in chunk:
                        chunk = chunk.replace(b"\r", b"")
                    yield line, chunk
                    line += chunk.count(b"\n")
                mib = raw.tell() // _MIB
                bar.update(mib - shown)
                shown = mib
                if at_end:
                    return

    # -- parsing -------------------------------------------------------------------------
    def _fail(self, line: int, why: str, text: str = "") -> InputError:
        shown = f": {text[:80]!r}" if text else ""
        return InputError(f"{self.path}, line {line}: {why}{shown} ({self.what})")

    def _detect_columns(self, chunk: bytes, first_line: int) -> None:
        """Take the column count from the first data line of the file."""
        for _, text in _data_lines(chunk, first_line):
            self.columns = len(_split(text, self.delimiter))
            return

    def _locate_error(self, chunk: bytes, first_line: int, fallback: str) -> InputError:
        """Find the first line of ``chunk`` that does not parse and describe it."""
        convert = int if self.dtype.kind in "iu" else float
        for line, text in _data_lines(chunk, first_line):
            fields = _split(text, self.delimiter)
            if self.columns is not None and len(fields) != self.columns:
                return self._fail(line, f"expected {self.columns} values, got {len(fields)}", text)
            if self.first_columns is not None:
                if len(fields) < self.first_columns:
                    return self._fail(
                        line, f"expected at least {self.first_columns} values, got {len(fields)}",
                        text,
                    )
                fields = fields[: self.first_columns]
            for field in fields:
                try:
                    value = convert(field)
                except ValueError:
                    kind = "an integer" if convert is int else "a number"
                    return self._fail(line, f"{field!r} is not {kind}", text)
                if convert is int and not np.can_cast(np.min_scalar_type(value), self.dtype):
                    return self._fail(line, f"{field} does not fit {self.dtype}", text)
        return InputError(f"{self.path}, lines {first_line}+: {fallback} ({self.what})")

    def _parse(self, chunk: bytes, first_line: int) -> np.ndarray:
        usecols = range(self.first_columns) if self.first_columns is not None else None
        try:
            text, delimiter = chunk, self.delimiter
            if delimiter == ANY:
                text, delimiter = chunk.replace(b",", b" "), None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
                table = np.loadtxt(
                    io.BytesIO(text), dtype=self.dtype, delimiter=delimiter,
                    comments=COMMENTS, usecols=usecols, ndmin=2,
                )
        except (ValueError, OverflowError) as err:
            raise self._locate_error(chunk, first_line, str(err)) from err
        width = self.first_columns if self.first_columns is not None else self.columns
        if table.size and table.shape[1] != width:
            raise self._locate_error(chunk, first_line, f"expected {width} values per line")
        return table

    def blocks(
        self, progress: str | None = None, show_progress: bool = True
    ) -> Iterator[np.ndarray]:
        """Yield the table as 2-D arrays of consecutive rows (blank and comment lines skipped).

        Parameters
        ----------
        progress
            Label of a progress bar over the file's bytes, or ``None`` for no bar.
        show_progress
            Set ``False`` to silence the bar.

        """
        for first_line, chunk in self._chunks(progress, show_progress):
            if self.columns is None and self.first_columns is None:
                self._detect_columns(chunk, first_line)
                if self.columns is None:
                    continue  # only comments so far
            table = self._parse(chunk, first_line)
            if table.size:
                yield table

    def read(self, progress: str | None = None, show_progress: bool = True) -> np.ndarray:
        """Read the whole table into one 2-D array (for tables known to be small)."""
        parts = list(self.blocks(progress, show_progress))
        if not parts:
            width = self.columns or self.first_columns or 0
            return np.empty((0, width), dtype=self.dtype)
        return np.concatenate(parts)


def read_column(path: str | os.PathLike, dtype: np.dtype | type, what: str) -> np.ndarray:
    """Read a one-value-per-line file (labels, split ids, counts) into a 1-D array."""
    return NumericTable(path, dtype=dtype, columns=1, what=what).read()[:, 0]

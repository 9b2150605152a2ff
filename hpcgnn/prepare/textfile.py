"""Stream numeric text tables (CSV, SNAP edge lists), plain or gzip-compressed, in blocks.

Files of any size are read in blocks of about :data:`BLOCK_BYTES` of text, each parsed
with NumPy's C tokenizer, so memory holds one block at a time. A malformed line is
reported as an :class:`~hpcgnn.errors.InputError` naming the file and the line number.
A table may have an :class:`OptionalColumn` (an edge list's weights): on every line or on
none, as its first data line says.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
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


def _field_problem(field: str, dtype: np.dtype) -> str | None:
    """Why ``field`` does not parse as a value of ``dtype``, or ``None``."""
    integer = dtype.kind in "iu"
    try:
        value = int(field) if integer else float(field)
    except ValueError:
        return f"{field!r} is not {'an integer' if integer else 'a number'}"
    if integer and not np.can_cast(np.min_scalar_type(value), dtype):
        return f"{field} does not fit {dtype}"
    return None


@dataclass(frozen=True)
class OptionalColumn:
    """A column after a table's ``first_columns`` that is on every line or on none.

    The first data line decides: more than ``first_columns`` values, and every line has
    the column (values after it are ignored); exactly ``first_columns``, and no line has
    it. A line that differs is an error naming it. The column's values must be finite.

    Attributes
    ----------
    name
        What the column holds, in messages (``"weight"``).
    dtype
        Type of its values.

    """

    name: str
    dtype: np.dtype


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
        (e.g. timestamps after an edge); excludes ``columns``.
    optional
        With ``first_columns``: one more column on every line or on none (see
        :class:`OptionalColumn`), read by :meth:`blocks_with_optional`.
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
        optional: OptionalColumn | None = None,
    ) -> None:
        if columns is not None and first_columns is not None:
            raise ValueError("give columns or first_columns, not both")
        if optional is not None and first_columns is None:
            raise ValueError("an optional column follows first_columns")
        self.path = require_file(path, what)
        self.dtype = np.dtype(dtype)
        self.columns = columns
        self.first_columns = first_columns
        self.delimiter = delimiter
        self.what = what
        self.block_bytes = block_bytes
        self.size = self.path.stat().st_size
        self.optional = optional
        #: Whether the lines have the optional column; ``None`` until the first data line.
        self.has_optional: bool | None = None

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

    def _detect_columns(self, chunk: bytes, first_line: int) -> bool:
        """Take what the first data line of the file sets, if ``chunk`` has one.

        The column count (without ``columns`` and ``first_columns``), or whether the lines
        have the optional column. Returns whether it is known now.
        """
        for _, text in _data_lines(chunk, first_line):
            width = len(_split(text, self.delimiter))
            if self.first_columns is None:
                self.columns = width
            elif self.optional is not None:
                self.has_optional = width > self.first_columns
            return True
        return False

    def _needs_detection(self) -> bool:
        if self.first_columns is None:
            return self.columns is None
        return self.optional is not None and self.has_optional is None

    def _width_problem(self, got: int) -> str | None:
        """Why a line of ``got`` values does not fit the table, or ``None``."""
        if self.columns is not None and got != self.columns:
            return f"expected {self.columns} values, got {got}"
        if self.first_columns is None:
            return None
        if got < self.first_columns:
            return f"expected at least {self.first_columns} values, got {got}"
        if self.optional is None or (got > self.first_columns) == self.has_optional:
            return None
        name = self.optional.name
        first = "has one" if self.has_optional else "has none"
        this = f"a {name}" if got > self.first_columns else f"no {name}"
        return f"{this}, but the first line {first} (a {name} on every line or on none)"

    def _typed_fields(self, fields: list[str]) -> list[tuple[str, np.dtype]]:
        """The fields of a line that are read, each with its dtype."""
        if self.first_columns is None:
            return [(f, self.dtype) for f in fields]
        typed = [(f, self.dtype) for f in fields[: self.first_columns]]
        if self.optional is not None and self.has_optional:
            typed.append((fields[self.first_columns], self.optional.dtype))
        return typed

    def _locate_error(self, chunk: bytes, first_line: int, fallback: str) -> InputError:
        """Find the first line of ``chunk`` that does not parse and describe it."""
        for line, text in _data_lines(chunk, first_line):
            problem = self._line_problem(_split(text, self.delimiter))
            if problem:
                return self._fail(line, problem, text)
        return InputError(f"{self.path}, lines {first_line}+: {fallback} ({self.what})")

    def _line_problem(self, fields: list[str]) -> str | None:
        """Why the values of a line do not fit the table, or ``None``."""
        problem = self._width_problem(len(fields))
        for field, dtype in [] if problem else self._typed_fields(fields):
            problem = _field_problem(field, dtype)
            if problem:
                break
        return problem

    def _layout(self) -> tuple[np.dtype, range | None, int | None]:
        """What :func:`numpy.loadtxt` reads: dtype, columns, and the width of the table.

        With the optional column the dtype is structured (the first columns, then it).
        """
        if self.first_columns is None:
            return self.dtype, None, self.columns
        if self.optional is None:
            return self.dtype, range(self.first_columns), self.first_columns
        if not self.has_optional:
            return self.dtype, None, self.first_columns  # every line exactly that wide
        fields = [(f"c{k}", self.dtype) for k in range(self.first_columns)]
        fields.append(("optional", self.optional.dtype))
        return np.dtype(fields), range(self.first_columns + 1), None

    def _parse(self, chunk: bytes, first_line: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The table of ``chunk``, and its optional column's values (or ``None``)."""
        dtype, usecols, width = self._layout()
        try:
            text, delimiter = chunk, self.delimiter
            if delimiter == ANY:
                text, delimiter = chunk.replace(b",", b" "), None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "input contained no data"
                table = np.loadtxt(
                    io.BytesIO(text), dtype=dtype, delimiter=delimiter,
                    comments=COMMENTS, usecols=usecols, ndmin=1 if width is None else 2,
                )
        except (ValueError, OverflowError) as err:
            raise self._locate_error(chunk, first_line, str(err)) from err
        if width is None:
            return self._split_optional(table, chunk, first_line)
        if table.size and table.shape[1] != width:
            raise self._locate_error(chunk, first_line, f"expected {width} values per line")
        return table, None

    def _split_optional(
        self, table: np.ndarray, chunk: bytes, first_line: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Split a structured table into its first columns and its finite optional column."""
        assert self.first_columns is not None
        values = table["optional"]
        if not np.isfinite(values).all():
            raise self._locate_not_finite(chunk, first_line)
        if not len(table):
            return np.empty((0, self.first_columns), dtype=self.dtype), values
        return np.stack([table[f"c{k}"] for k in range(self.first_columns)], axis=1), values

    def _locate_not_finite(self, chunk: bytes, first_line: int) -> InputError:
        """Find the first line of ``chunk`` whose optional value is NaN or Inf (as stored)."""
        assert self.optional is not None and self.first_columns is not None
        name, dtype = self.optional.name, self.optional.dtype
        for line, text in _data_lines(chunk, first_line):
            field = _split(text, self.delimiter)[self.first_columns]
            with np.errstate(over="ignore"):
                if not np.isfinite(np.asarray(float(field)).astype(dtype)):
                    return self._fail(line, f"{name} {field} is not a finite {dtype}", text)
        return InputError(f"{self.path}, lines {first_line}+: a {name} is not finite ({self.what})")

    def blocks_with_optional(
        self, progress: str | None = None, show_progress: bool = True
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """Yield the table as :meth:`blocks` does, each block with its optional column.

        The optional column's values are ``None`` when the lines do not have it (see
        :attr:`has_optional`, known once the first block is yielded).
        """
        for first_line, chunk in self._chunks(progress, show_progress):
            if self._needs_detection() and not self._detect_columns(chunk, first_line):
                continue  # only comments so far
            table, values = self._parse(chunk, first_line)
            if table.size:
                yield table, values

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
        for table, _ in self.blocks_with_optional(progress, show_progress):
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

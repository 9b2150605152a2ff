"""Arrays of an ``.npz`` archive read in row blocks, never whole (OGB's binary datasets).

``numpy.load`` on an ``.npz`` reads a member completely when it is asked for: 57 GB of
features and 26 GB of edges for ogbn-papers100M. :class:`NpzArray` reads a member's
``.npy`` header, then streams its data from the (stored or deflated) ZIP member: rows of a
C-ordered matrix in blocks, or the two rows of an edge index ``(2, E)`` side by side
(two readers on the same member, one started ``E`` values in).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

from hpcgnn.errors import InputError

#: Bytes of one block of rows read from a member.
BLOCK_BYTES = 32 << 20


class NpzArray:
    """The array ``key`` of the archive ``path``: its shape and dtype, and its data in blocks.

    Raises
    ------
    InputError
        The file is no ZIP archive, has no such array, or the member is no plain ``.npy``
        array (object arrays are refused: they would need pickle).
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = path, key
        try:
            self._zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as err:
            raise InputError(f"{path}: not a readable .npz archive: {err}") from err
        self.member = f"{key}.npy"
        if self.member not in self._zip.namelist():
            names = sorted(n.removesuffix(".npy") for n in self._zip.namelist())
            self._zip.close()
            raise InputError(f"{path}: no array '{key}' (it holds: {', '.join(names)})")
        try:
            with self._zip.open(self.member) as f:
                version = np.lib.format.read_magic(f)
                header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                          else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = header(f)
                self.offset = f.tell()
        except (OSError, ValueError, zipfile.BadZipFile) as err:
            self._zip.close()
            raise InputError(f"{path}: array '{key}' is no readable .npy member: {err}") from err
        if dtype.hasobject:
            self._zip.close()
            raise InputError(f"{path}: array '{key}' holds Python objects (not supported)")
        self.shape: tuple[int, ...] = tuple(int(d) for d in shape)
        self.fortran: bool = bool(fortran) and len(self.shape) > 1
        self.dtype: np.dtype = dtype

    def close(self) -> None:
        """Close the archive."""
        self._zip.close()

    def __enter__(self) -> NpzArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reader(self, start: int) -> IO[bytes]:
        """The member positioned at value ``start`` of its data."""
        f = self._zip.open(self.member)
        f.seek(self.offset + start * self.dtype.itemsize)
        return f

    def _read(self, f: IO[bytes], count: int) -> np.ndarray:
        data = f.read(count * self.dtype.itemsize)
        if len(data) != count * self.dtype.itemsize:
            raise InputError(f"{self.path}: array '{self.key}' ends early (truncated archive)")
        return np.frombuffer(data, dtype=self.dtype)

    def read(self) -> np.ndarray:
        """The whole array (for the small ones: labels, counts)."""
        count = int(np.prod(self.shape, dtype=np.int64))
        with self._reader(0) as f:
            flat = self._read(f, count)
        return flat.reshape(self.shape, order="F" if self.fortran else "C")

    def row_blocks(self) -> Iterator[np.ndarray]:
        """Rows of a C-ordered 2-D array, about :data:`BLOCK_BYTES` per block."""
        if len(self.shape) != 2 or self.fortran:
            raise InputError(
                f"{self.path}: array '{self.key}' has shape {self.shape}"
                f"{' in column-major order' if self.fortran else ''}; expected a row-major"
                " matrix (one row per vertex)"
            )
        n, width = self.shape
        step = max(1, BLOCK_BYTES // max(1, width * self.dtype.itemsize))
        with self._reader(0) as f:
            for lo in range(0, n, step):
                rows = min(step, n - lo)
                yield self._read(f, rows * width).reshape(rows, width)

    def pair_blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Column blocks ``(a[0, k], a[1, k])`` of a ``(2, E)`` array (an edge index)."""
        if len(self.shape) != 2 or self.shape[0] != 2:
            raise InputError(
                f"{self.path}: array '{self.key}' has shape {self.shape}, expected (2, E)"
            )
        e = self.shape[1]
        step = max(1, BLOCK_BYTES // (2 * self.dtype.itemsize))
        if self.fortran:  # the pairs are interleaved: src0 dst0 src1 dst1 ...
            with self._reader(0) as f:
                for lo in range(0, e, step):
                    pairs = self._read(f, 2 * min(step, e - lo)).reshape(-1, 2)
                    yield pairs[:, 0], pairs[:, 1]
            return
        with self._reader(0) as src, self._reader(e) as dst:
            for lo in range(0, e, step):
                k = min(step, e - lo)
                yield self._read(src, k), self._read(dst, k)

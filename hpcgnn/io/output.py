"""HDF5 outputs that a full disk cannot turn into a crash.

HDF5 caches metadata and chunks and writes them later: when the file or a dataset is
closed, also when Python garbage-collects a dataset object. If such a deferred write
fails (the disk is full, a file-size limit is hit), HDF5 is left half-closed and the
interpreter crashes later. So an :class:`H5Output`

- writes a temporary file (:class:`~hpcgnn.utils.files.TemporaryOutput`) that is renamed
  over the target only once complete, so a previous good file survives any failure;
- flushes the file before closing it, so a deferred write fails where it can be reported;
- closes a file it discards with the file's descriptor pointed at ``/dev/null``, so the
  writes HDF5 still makes while closing succeed and go nowhere (only the final resize
  fails; a second close then completes);
- reports a failed write (an :class:`OSError` or, from some HDF5 calls, a
  :class:`RuntimeError`) as an :class:`~hpcgnn.errors.OutputError` naming the output
  and the reason (``No space left on device``, ``File too large``).

Datasets are written with :func:`write_dataset`, or flushed before their last reference
goes, so that no write is left for the garbage collector.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from typing import Any

import h5py
import numpy as np

from hpcgnn.utils.files import TemporaryOutput, output_error, output_errors

#: What h5py raises when HDF5 fails to write; which one depends on the HDF5 call.
H5_WRITE_ERRORS = (OSError, RuntimeError)


class H5Output:
    """An HDF5 file written under a temporary name; it replaces ``path`` when committed.

    Parameters
    ----------
    path
        The output file. A symlink or another non-regular file there is refused.
    what
        How messages name the output, e.g. ``"--out"``.

    Attributes
    ----------
    file : h5py.File
        The open temporary file to write.

    Examples
    --------
    >>> with H5Output("s.h5", "--out") as out:            # doctest: +SKIP
    ...     write_dataset(out.file, "seeds", seeds)
    """

    def __init__(self, path: str | os.PathLike, what: str = "output") -> None:
        self._out = TemporaryOutput(path, what)
        try:
            with self.errors():
                self.file = h5py.File(self._out.tmp, "w")
        except BaseException:
            self._out.discard()
            raise

    def errors(self) -> AbstractContextManager[None]:
        """Report a failed write in the body as an ``OutputError`` naming this output."""
        return output_errors(self._out.path, self._out.what, H5_WRITE_ERRORS)

    def __enter__(self) -> H5Output:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.commit()
            return
        self.discard()
        if isinstance(exc, H5_WRITE_ERRORS):
            raise output_error(self._out.path, self._out.what, exc) from exc

    def commit(self) -> None:
        """Flush and close the complete file and rename it over the output."""
        try:
            with self.errors():
                self.file.flush()
                self.file.close()
        except BaseException:
            self.discard()
            raise
        self._out.commit()

    def discard(self) -> None:
        """Close the file without writing more to disk and remove it (idempotent)."""
        if self.file.id.valid:
            null = os.open(os.devnull, os.O_RDWR)
            try:
                os.dup2(null, self.file.id.get_vfd_handle())
            finally:
                os.close(null)
            try:
                self.file.close()
            except H5_WRITE_ERRORS:
                # HDF5 failed to extend /dev/null to the file's allocated size, its last
                # step; closing again finds nothing left to write.
                self.file.close()
        self._out.discard()


#: Dataset options of every chunked dataset hpcgnn writes: HDF5's Fletcher-32 checksum of
#: each chunk (as stored, after compression), verified on every read, so a flipped bit is
#: a read error naming the dataset instead of silently wrong values.
CHECKSUM: dict[str, Any] = {"fletcher32": True}


def write_dataset(
    group: h5py.Group, name: str, data: np.ndarray, **options: Any
) -> h5py.Dataset:
    """Create ``group[name]`` holding ``data``, written and flushed to the file now.

    ``options`` go to :meth:`h5py.Group.create_dataset` (``chunks``, ``compression``...);
    a dataset with values is chunked (``chunks=True`` unless given) and checksummed
    (:data:`CHECKSUM`).
    """
    data = np.require(data, requirements="C")
    if data.size:
        options = {"chunks": True, **CHECKSUM, **options}
    ds = group.create_dataset(name, shape=data.shape, dtype=data.dtype, **options)
    if data.size:
        ds.id.write(h5py.h5s.ALL, h5py.h5s.ALL, data)  # all at once: cheaper than ds[...] =
    ds.flush()
    return ds

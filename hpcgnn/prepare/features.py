"""Feature matrices produced block by block: generated, from arrays, or from sparse rows.

Every generator yields float32 row blocks of about :data:`BLOCK_BYTES`, so writing the
features of a graph of any size needs memory for one block only. Block boundaries depend
only on the feature width, which keeps seeded features identical from run to run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from hpcgnn.io.arrays import row_normalized

#: Size of one generated or converted block of feature rows.
BLOCK_BYTES = 32 << 20


def block_rows(num_features: int) -> int:
    """Rows per block for a feature matrix of width ``num_features`` (float32)."""
    return max(1, BLOCK_BYTES // (4 * max(1, num_features)))


def class_centres(
    num_classes: int, num_features: int, rng: np.random.Generator
) -> np.ndarray:
    """Random class centres of Euclidean norm about 1 (entries ``N(0, 1/F)``)."""
    scale = 1.0 / math.sqrt(num_features)
    return (rng.standard_normal((num_classes, num_features)) * scale).astype(np.float32)


def class_feature_blocks(
    labels: np.ndarray, centres: np.ndarray, noise: float, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Yield ``centres[label] + noise * N(0, 1)`` rows, one block at a time.

    Parameters
    ----------
    labels
        Class id per vertex (all ``>= 0``).
    centres
        One row per class, see :func:`class_centres`.
    noise
        Standard deviation of the independent Gaussian noise added to every entry.
        With centres of norm 1, two classes are separated by about ``0.71 / noise``
        noise standard deviations along the line joining their centres.
    rng
        Source of the noise.

    """
    n, f = labels.size, centres.shape[1]
    step = block_rows(f)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = rng.standard_normal((hi - lo, f), dtype=np.float32)
        block *= np.float32(noise)
        block += centres[labels[lo:hi]]
        yield block


def random_feature_blocks(
    num_nodes: int, num_features: int, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Yield standard normal float32 rows carrying no information (for timing runs)."""
    step = block_rows(num_features)
    for lo in range(0, num_nodes, step):
        yield rng.standard_normal((min(num_nodes, lo + step) - lo, num_features), dtype=np.float32)


def array_feature_blocks(array: np.ndarray) -> Iterator[np.ndarray]:
    """Yield float32 row blocks of a dense 2-D array (also a memory-mapped ``.npy``)."""
    step = block_rows(array.shape[1])
    for lo in range(0, array.shape[0], step):
        yield np.asarray(array[lo : lo + step], dtype=np.float32)


def sparse_feature_blocks(matrix: sp.csr_matrix) -> Iterator[sp.csr_matrix]:
    """Yield float32 CSR row blocks of a sparse matrix (as many rows as a dense block)."""
    matrix = sp.csr_matrix(matrix)
    step = block_rows(matrix.shape[1])
    for lo in range(0, matrix.shape[0], step):
        yield matrix[lo : lo + step].astype(np.float32)


def row_normalized_blocks(
    blocks: Iterable[np.ndarray | sp.csr_matrix],
) -> Iterator[np.ndarray | sp.csr_matrix]:
    """The blocks with each row divided by the sum of its absolute values (``--row-normalize``).

    :func:`hpcgnn.io.arrays.row_normalized` per block: a row of zeros stays zero, float32.
    """
    for block in blocks:
        yield row_normalized(block).astype(np.float32)

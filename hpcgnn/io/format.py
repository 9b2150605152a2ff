"""The hpcgnn HDF5 graph format: names, version and dtypes in one place.

See ``docs/format.md`` for the user-facing description. Every reader and writer in the
package takes its dataset names from here.
"""

from __future__ import annotations

import numpy as np

FORMAT_NAME = "hpcgnn-graph"
#: The newest ``format_version`` this code reads.
FORMAT_VERSION = 3
#: The version of a file without edge weights (what every hpcgnn reads).
UNWEIGHTED_VERSION = 1
#: The version of a file with edge weights (``adjacency/data``), which a reader of version 1
#: would silently read as unweighted.
WEIGHTED_VERSION = 2
#: The version of a file with multi-label targets (``labels`` a ``(n, C)`` 0/1 matrix),
#: which a reader of version 2 refuses by the dataset's shape; weighted or not.
MULTI_LABEL_VERSION = 3

# Root attributes.
#: Largest ``num_classes`` accepted (``2^31 - 1``): a label is a class id, and no data set
#: has more classes than an int32 counts; a larger count is forged or corrupt.
MAX_CLASSES = 2**31 - 1

ATTR_FORMAT = "format"
ATTR_VERSION = "format_version"
ATTR_NUM_NODES = "num_nodes"
ATTR_NUM_EDGES = "num_edges"
ATTR_NUM_FEATURES = "num_features"
ATTR_NUM_CLASSES = "num_classes"
ATTR_DIRECTED = "directed"
ATTR_NAME = "name"
ATTR_SOURCE = "source"
#: How the stored features were normalised by ``prepare`` (``row``: every row sums to 1, as
#: Kipf & Welling's preprocessing); absent or empty: as the input gave them.
ATTR_FEATURE_NORMALIZATION = "feature_normalization"
#: The values :data:`ATTR_FEATURE_NORMALIZATION` may take.
FEATURE_NORMALIZATIONS = ("", "row")

# Groups and datasets.
ADJACENCY = "adjacency"  # CSR of A: row i lists the targets j of edges i -> j
ADJACENCY_T = "adjacency_t"  # CSR of A^T (row j lists the sources of edges into j); directed only
INDPTR = "indptr"
INDICES = "indices"
FEATURES = "features"
FEATURES_CSR = "features_csr"  # the features as CSR (instead of FEATURES): indptr, indices, data
#: Values of a CSR: of ``features_csr``, and the optional edge weights of ``adjacency`` and
#: ``adjacency_t`` (one per entry of ``indices``).
DATA = "data"
LABELS = "labels"
MASKS = "masks"
MASK_NAMES = ("train", "val", "test")
NODE_IDS = "node_ids"
PARTITION = "partition"
PART_OFFSETS = "offsets"
PART_PERM = "perm"
#: ``partition/blocks/<B>``: each block's nonzeros and halo sizes when the partition is
#: coarsened to ``B`` blocks (every ``B`` dividing its parts; names of
#: :data:`hpcgnn.layout.block_counts.COUNT_NAMES`). Optional: older files have none.
PART_BLOCKS = "blocks"

INDPTR_DTYPE = np.dtype(np.int64)
LABEL_DTYPE = np.dtype(np.int64)
#: The dtype of multi-label targets: a ``(n, C)`` matrix of 0 and 1.
MULTI_LABEL_DTYPE = np.dtype(np.uint8)
NODE_ID_DTYPE = np.dtype(np.int64)
#: Feature dtypes a writer stores: float16 only where its input has them (``partition`` of a
#: float16 file keeps them; ``train`` computes in ``--dtype``).
FEATURE_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
#: Edge weight dtypes a writer stores: float64 where its input has them, else float32.
WEIGHT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
UNLABELLED = -1


def format_version(weighted: bool, multi_label: bool = False) -> int:
    """The ``format_version`` a file is written with: 3 multi-label, 2 weighted, else 1."""
    if multi_label:
        return MULTI_LABEL_VERSION
    return WEIGHTED_VERSION if weighted else UNWEIGHTED_VERSION


def labelled(labels: np.ndarray) -> np.ndarray:
    """Which rows of ``labels`` are labelled: class ids but ``-1``; every row of a 0/1 matrix.

    A multi-label row is its classes' indicators, so a row of zeros (no class) is a target.
    """
    if labels.ndim == 2:
        return np.ones(len(labels), dtype=bool)
    return labels != UNLABELLED


def weight_dtype(dtype: np.dtype | type) -> np.dtype:
    """The dtype edge weights given as ``dtype`` are stored in: float64 stays, else float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def sparse_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype CSR feature values take in SciPy (which has no float16 sparse matrices).

    float16 goes through float32; float32 and float64 stay.
    """
    return np.promote_types(dtype, np.float32)

# Storage layout: 1-D datasets are chunked by this many elements, feature rows by enough
# rows to make a chunk of about this many bytes.
CHUNK_ELEMENTS = 1 << 18
FEATURE_CHUNK_BYTES = 1 << 20
COMPRESSION = "gzip"
COMPRESSION_LEVEL = 1


def index_dtype(num_nodes: int) -> np.dtype:
    """Return the narrowest signed integer dtype that holds vertex ids below ``num_nodes``."""
    return np.dtype(np.int32) if num_nodes < 2**31 else np.dtype(np.int64)


def feature_chunk_rows(num_features: int, itemsize: int = 4) -> int:
    """Rows per HDF5 chunk of the feature matrix."""
    return max(1, FEATURE_CHUNK_BYTES // max(1, num_features * itemsize))

// dropout.cu: dropout keep-masks bit-identical to the entry streams of hpcgnn/rng.py.
//
// CPU twins: hpcgnn/kernels/dropout.py (keep_matrix, keep_pairs), which compute
// rng.dropout_keep / rng.dropout_keep_pairs with torch on the host.
//
// An entry (row, col) of the stream keyed row_key is kept when
// hpcgnn_entry_keep(row, col, row_key, col_key, threshold) (cuda/hash.cuh): a 64-bit hash of
// the global row and one of the global column, combined by a 32-bit hash and compared with
// threshold = ceil(p 2^32). Every entry is independent of every other: one thread per entry,
// grid-stride, 64-bit indexing (n * ncols may exceed 2^31).
//
// hash_keep: the block rows x cols, rows[i] and cols[j] global indices (a rank's rows or a
// batch's vertices; all columns or a GIST sub-network's), out C-contiguous bool n x ncols:
//   out[i * ncols + j] = keep of (rows[i], cols[j]).
// hash_pair_keep: the entries (rows[k], cols[k]), k < count (the nonzeros of a sparse
// matrix: Kipf's sparse dropout draws the dense mask's decisions at them):
//   out[k] = keep of (rows[k], cols[k]).
#include "grid.cuh"
#include "hash.cuh"

extern "C" __global__ void hash_keep(
    const long long* __restrict__ rows, long long n, const long long* __restrict__ cols,
    long long ncols, unsigned long long row_key, unsigned long long col_key,
    unsigned long long threshold, bool* __restrict__ out) {
    const long long total = n * ncols;
    for (long long e = hpcgnn_thread(); e < total; e += hpcgnn_threads()) {
        const long long i = e / ncols;
        const long long j = e - i * ncols;
        out[e] = hpcgnn_entry_keep(rows[i], cols[j], row_key, col_key, threshold);
    }
}

extern "C" __global__ void hash_pair_keep(
    const long long* __restrict__ rows, const long long* __restrict__ cols, long long count,
    unsigned long long row_key, unsigned long long col_key, unsigned long long threshold,
    bool* __restrict__ out) {
    for (long long k = hpcgnn_thread(); k < count; k += hpcgnn_threads()) {
        out[k] = hpcgnn_entry_keep(rows[k], cols[k], row_key, col_key, threshold);
    }
}

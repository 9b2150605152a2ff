// dropout.cu: dropout keep-masks bit-identical to the CPU streams of hpcgnn/rng.py.
//
// CPU twins: hpcgnn/kernels/dropout.py (block_keep, rows_keep), which call
// rng.dropout_keep / rng.dropout_keep_rows.
//
// sfc64_block_keep: the full-batch block stream. The global ? x num_cols matrix of
// uniforms is cut into chunks of chunk_rows rows; chunk k is drawn row-major by an SFC64
// generator whose initial state the host computes with NumPy
// (np.random.SFC64(SeedSequence([key & 0xFFFFFFFF, key >> 32, k])).state), one state
// {a, b, c, counter} per chunk in states[4 * c .. 4 * c + 3] for chunks chunk0 + c,
// c < chunks. Uniform u = (next >> 11) * 2^-53 (Generator.random), keep = u >= p, taken
// as the exact integer test (next >> 11) >= threshold with threshold = ceil(p * 2^53)
// (the host's keep_threshold): no float conversion in the serial chain's steps.
//   out[(r - r0) * (c1 - c0) + (j - c0)] = keep of global (row r, column j)
//   for r in [r0, r1), j in [c0, c1); out is C-contiguous bool (r1 - r0) x (c1 - c0).
// Geometry: one thread per chunk (SFC64 has no jump-ahead), grid-stride over the chunks
// (any grid gives every chunk; the dispatch launches one block of one thread per chunk,
// capped at MAX_BLOCKS, so the chains spread over every SM: packed 256 to a block, the
// 228 chunks of a Reddit-sized input shared one SM, 173 ms of masks per epoch on an H200
// against 33 ms now, measured). A chunk draws (hi - base) * num_cols numbers sequentially,
// hi - base <= chunk_rows, skipping the draws of its rows before r0; so the kernel costs
// O(chunk_rows * num_cols) dependent steps (a 1024 x 602 chunk: 0.6 M steps, some 50 ns
// each on an H200, all chunks running side by side) with only
// ceil(rows / chunk_rows) threads busy: the price of bit-identity with the CPU stream (a
// different stream would change every result), paid once per layer and epoch.
//
// hash_rows_keep: the minibatch hash stream (rng.uniform_rows): entry (i, j) of the
// n x ncols mask is mix((row_ids[i] * width + col_j) ^ key) mapped to [0, 1), keep = u >= p
// (as the integer test (bits >> 11) >= threshold)
// (wrapping uint64 maths), col_j = cols[j]: all columns (cols = 0 .. width-1, ncols = width)
// or a GIST sub-network's columns of the width. One thread per entry, grid-stride.
#include "grid.cuh"
#include "hash.cuh"

extern "C" __global__ void sfc64_block_keep(
    const unsigned long long* __restrict__ states, long long chunk0, long long chunks,
    long long chunk_rows, long long r0, long long r1, long long num_cols, long long c0,
    long long c1, unsigned long long threshold, bool* __restrict__ out) {
    const long long width = c1 - c0;
    for (long long c = hpcgnn_thread(); c < chunks; c += hpcgnn_threads()) {
        unsigned long long s[4] = {states[4 * c], states[4 * c + 1], states[4 * c + 2],
                                   states[4 * c + 3]};
        const long long base = (chunk0 + c) * chunk_rows;
        const long long lo = r0 > base ? r0 : base;
        const long long hi = r1 < base + chunk_rows ? r1 : base + chunk_rows;
        for (long long k = (lo - base) * num_cols; k > 0; --k) hpcgnn_sfc64_next(s);
        for (long long r = lo; r < hi; ++r) {
            bool* row = out + (r - r0) * width;
            for (long long j = 0; j < num_cols; ++j) {
                const bool keep = (hpcgnn_sfc64_next(s) >> 11) >= threshold;
                if (j >= c0 && j < c1) row[j - c0] = keep;
            }
        }
    }
}

extern "C" __global__ void hash_rows_keep(
    const long long* __restrict__ row_ids, long long n, long long width,
    const long long* __restrict__ cols, long long ncols, unsigned long long key,
    unsigned long long threshold, bool* __restrict__ out) {
    const long long total = n * ncols;
    for (long long e = hpcgnn_thread(); e < total; e += hpcgnn_threads()) {
        const long long i = e / ncols;
        const long long j = e - i * ncols;
        const unsigned long long counter =
            (unsigned long long)row_ids[i] * (unsigned long long)width +
            (unsigned long long)cols[j];
        out[e] = (hpcgnn_mix(counter ^ key) >> 11) >= threshold;
    }
}

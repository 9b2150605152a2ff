// sampling.cu: the kernels of the bulk samplers that decide a draw: the rounds of inverse
// transform sampling (ITS), the rows' random-stream keys and the rows' prefix sums.
//
// CPU twins: hpcgnn/kernels/sampling.py (its_round, uniform_round, row_keys,
// segment_cumsum), called through hpcgnn/sampling/arrays.py by the samplers
// (hpcgnn/sampling/its.py keeps the rounds, the acceptance of distinct hits and the
// bookkeeping). Every result is bit-identical to the twin's.
//
// row_keys: out[i] = chain(chain(chain(key, batch[i]), hop), vertex[i]) (rng.chain(key,
// batch, hop, vertex)); with_vertex == 0 leaves out the last word (vertex is not read).
//
// segment_cumsum: out[e] = w[ptr[r]] + ... + w[e] for the entries e of row r, summed in
// order by one thread per row (as NumPy's cumsum along a row: no parallel scan, whose
// rounding would differ), double adds without contraction (--fmad=false).
//
// Common to both kernels: `rows` active rows; active row a draws need[a] numbers, draw t
// of round rnd using u = uniform(chain(chain(keys[a], rnd), t)) (rng.chain(key, rnd, t)),
// and writes its result to out[draw_off[a] + t], draw_off = exclusive prefix sum of need
// (the draws of the rows concatenated in row order).
//
// its_round: weighted rows. cum holds each active row's inclusive prefix sums in
// cum[sub_ptr[a] .. sub_ptr[a + 1]), total[a] the row's sum. The draw is
// x = min(u * total[a], nextafter(total[a], -inf)) and the result is the first position
// i in [sub_ptr[a], sub_ptr[a + 1]) with cum[i] > x (binary search; sub_ptr[a + 1] if
// none, which cannot happen for a row with a positive total).
//
// uniform_round: rows of equal weights (GraphSAGE). remaining[a] >= 1 entries are left;
// the result is the rank min(floor(u * remaining[a]), remaining[a] - 1) of the entry
// drawn among them (the closed form of the search).
//
// Geometry (all four): one thread per row (row_keys: per element; ITS: need[a] is at most
// the fanout), grid-stride: the dispatch launches ceil(rows / 256) blocks of 256, capped
// at MAX_BLOCKS, and the threads loop over the rows past the grid, so any grid gives
// every row its result.
#include "grid.cuh"
#include "hash.cuh"

extern "C" __global__ void its_round(
    const unsigned long long* __restrict__ keys, const long long* __restrict__ need,
    const long long* __restrict__ draw_off, long long rows, long long rnd,
    const double* __restrict__ cum, const long long* __restrict__ sub_ptr,
    const double* __restrict__ total, long long* __restrict__ out) {
    for (long long a = hpcgnn_thread(); a < rows; a += hpcgnn_threads()) {
        const unsigned long long key = hpcgnn_chain(keys[a], rnd);
        const double tot = total[a];
        const double top = nextafter(tot, __longlong_as_double(0xFFF0000000000000LL));
        for (long long t = 0; t < need[a]; ++t) {
            const double x = fmin(hpcgnn_uniform(hpcgnn_chain(key, t)) * tot, top);
            long long lo = sub_ptr[a], hi = sub_ptr[a + 1];
            while (lo < hi) {
                const long long mid = (lo + hi) >> 1;
                if (cum[mid] <= x) lo = mid + 1; else hi = mid;
            }
            out[draw_off[a] + t] = lo;
        }
    }
}

extern "C" __global__ void uniform_round(
    const unsigned long long* __restrict__ keys, const long long* __restrict__ need,
    const long long* __restrict__ draw_off, long long rows, long long rnd,
    const long long* __restrict__ remaining, long long* __restrict__ out) {
    for (long long a = hpcgnn_thread(); a < rows; a += hpcgnn_threads()) {
        const unsigned long long key = hpcgnn_chain(keys[a], rnd);
        const long long m = remaining[a];
        for (long long t = 0; t < need[a]; ++t) {
            const long long r = (long long)(hpcgnn_uniform(hpcgnn_chain(key, t)) * (double)m);
            out[draw_off[a] + t] = r < m - 1 ? r : m - 1;
        }
    }
}

extern "C" __global__ void row_keys(
    unsigned long long key, long long n, const long long* __restrict__ batch, long long hop,
    const long long* __restrict__ vertex, long long with_vertex,
    unsigned long long* __restrict__ out) {
    for (long long i = hpcgnn_thread(); i < n; i += hpcgnn_threads()) {
        const unsigned long long k = hpcgnn_chain(hpcgnn_chain(key, batch[i]), hop);
        out[i] = with_vertex ? hpcgnn_chain(k, vertex[i]) : k;
    }
}

extern "C" __global__ void segment_cumsum(
    const long long* __restrict__ ptr, long long rows, const double* __restrict__ w,
    double* __restrict__ out) {
    for (long long r = hpcgnn_thread(); r < rows; r += hpcgnn_threads()) {
        double s = 0.0;
        for (long long e = ptr[r]; e < ptr[r + 1]; ++e) {
            s += w[e];
            out[e] = s;
        }
    }
}
